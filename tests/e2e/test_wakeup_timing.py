"""A child's change wakes its parents when Kopf learns of it, whatever the child's own handlers do
(issue 43, finding 1), on the real API server: the child's own handler takes 20 s over its
change, and the parent it leaves goes at once, not when that handler returns."""
from __future__ import annotations

import time

from tests.e2e.conftest import eventually, get_example
from tests.e2e.test_memory import patch
from tests.e2e.test_objects import finalizer_added

OPERATOR = "tests/e2e/operators/late_wakeups_operator.py"
PARENT = "example.com/parent"


async def create(objects, namespace: str, name: str, labels: dict[str, str]) -> None:
    await objects.create_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", {
        "apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": name, "labels": labels}, "spec": {}})


async def gone(objects, namespace: str, name: str) -> bool:
    return await get_example(objects, namespace, name) is None


async def test_a_parent_wakes_at_once_when_a_child_whose_own_handler_takes_its_time_leaves_it(
        objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await create(objects, namespace, "p", {"role": "parent"})
        await create(objects, namespace, "c", {"role": "child", PARENT: "p"})
        await eventually(lambda: finalizer_added(objects, namespace, "p"), what="the parent's finalizer")
        await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", "p")
        await op.wait_for(lambda r: "waiting for the children to go" in r.message and r.object == f"{namespace}/p",
                          what="the parent waits")
        started = time.monotonic()
        await patch(objects, namespace, "c", {"metadata": {"labels": {PARENT: "q"}}})  # it leaves p
        await eventually(lambda: gone(objects, namespace, "p"), timeout=30, what="the parent to go")
        assert time.monotonic() - started < 5  # was: 20 s, when the child's own handler returned
        assert not [r for r in op.records() if r.level in ("ERROR", "CRITICAL")]
