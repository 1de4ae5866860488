"""
The sharding how-to's "Run it on your machine" (docs/howto/shard.md) runs as written on the local
control plane, and shows what it prints (issue 44): tests/e2e/page_replay.py types its blocks into
three shells; each ``why`` output is compared with the page's, times, ages and the operators'
identities aside. ``KOPF_OUTCOMES_RECORD=DIR`` writes the outputs there (to refresh the page).
"""
from __future__ import annotations

from pathlib import Path

from kopf_outcomes_testing import ClusterInfo
from tests.docs.blocks import ROOT, following
from tests.e2e.page_replay import check_outputs, local_blocks, replay, terminal_of

HOWTO = ROOT / "docs" / "howto" / "shard.md"


def test_the_howto_has_its_local_blocks() -> None:
    found = [terminal_of(b) for b in local_blocks(HOWTO)]
    assert found == ["terminal-1", "terminal-2", "terminal-3"] + ["terminal-1"] * 4
    whys = [b for b in local_blocks(HOWTO) if "kopf-outcomes why" in b.code]
    assert len(whys) == 2 and all((following(b) or b).language == "text" for b in whys)


def test_the_howto_runs_as_written_and_shows_what_it_prints(cluster: ClusterInfo, namespace: str,
                                                            tmp_path: Path) -> None:
    outputs, logs = replay(HOWTO, "shards-demo", cluster, namespace, tmp_path)
    assert check_outputs(outputs, namespace, "shards-demo") in (0, 2)  # 0 when recording
    assert logs["terminal-2"].count("Asked the external system to delete its side") == 1
    assert "Asked the external system" not in logs["terminal-3"]
    assert "Handler 'delete_fn' succeeded." in logs["terminal-3"]
