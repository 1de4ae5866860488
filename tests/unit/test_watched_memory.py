"""What kopf-outcomes keeps per watched object (issue 43, RSS per watched object): the children of
one parent share the parent's keys, through Kopf's real processing of their events, so that what a
child costs does not grow with the length of its keys (benchmarks/README.md, scenario 9)."""
from __future__ import annotations

from typing import Any

from kopf_outcomes import objects
from tests.unit.test_wakeup_timing import child_event, operator, patched, worker_of

__all__ = ["patched"]


async def test_the_children_of_one_parent_share_its_wake_keys_and_index_keys(patched: None) -> None:
    async def child_fn(**_: Any) -> Any:
        return None

    registry, source = operator(child_fn)
    process = worker_of(registry)
    children = [child_event(name, "a", kind=None) for name in ("c1", "c2")]
    for event in children:
        await process(event)
    try:
        first, second = objects._last_keys["u-c1"], objects._last_keys["u-c2"]
        assert first == second and len(first) == 2
        assert all(mine is theirs for mine, theirs in zip(first, second, strict=True))
        index_keys = [list(source.entries(event["object"])) for event in children]
        assert index_keys[0] == index_keys[1]
        assert all(mine is theirs for mine, theirs in zip(*index_keys, strict=True))
    finally:
        for name in ("c1", "c2"):
            await process(child_event(name, "a", kind="DELETED"))
    assert "u-c1" not in objects._last_keys  # still forgotten as they go
