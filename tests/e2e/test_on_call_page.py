"""
The on-call page (docs/howto/on-call.md) runs as written on the local control plane and shows what
it prints (issue 44): an alert's gauge, ``stuck``, ``why`` of an object no shard serves and of
one that waits for its callback, the fix, the callback from the shell. tests/e2e/page_replay.py
types its blocks; ``KOPF_OUTCOMES_RECORD=DIR`` writes the outputs there (to refresh the page).
"""
from __future__ import annotations

from pathlib import Path

from kopf_outcomes_testing import ClusterInfo
from tests.docs.blocks import ROOT
from tests.e2e.page_replay import check_outputs, replay
from tests.e2e.test_prometheus import free_port

PAGE = ROOT / "docs" / "howto" / "on-call.md"


def test_the_page_runs_as_written_and_shows_what_it_prints(cluster: ClusterInfo, namespace: str,
                                                           tmp_path: Path) -> None:
    port = str(free_port())  # the page's 9464 may be taken on a shared machine
    outputs, logs = replay(PAGE, "on-call", cluster, namespace, tmp_path, replaced={"9464": port})
    assert check_outputs(outputs, namespace, "on-call") in (0, 6)  # 0 when recording
    assert logs["terminal-2"].count("Handler 'delete_fn' succeeded.") == 2
