"""The tutorial, run literally in fresh terminals from a fresh install, reproduces its page
(docs/tutorial/replay.py: the page's commands typed into three clean shells, the wheels from
scripts/dist; both operators' logs and both deletion times compared with the page's)."""
from __future__ import annotations

import subprocess
import sys

from kopf_outcomes_testing import ClusterInfo
from tests.docs.blocks import ROOT


def test_the_tutorial_reproduces_its_page(cluster: ClusterInfo) -> None:
    result = subprocess.run([sys.executable, ROOT / "docs" / "tutorial" / "replay.py"],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stderr.count("replay: as on the page:") == 2, result.stderr
    assert "the tutorial reproduces its page" in result.stderr
