"""The seed story (Kopf issue 850) end to end on the real API server."""
from __future__ import annotations

import asyncio
import time

import pytest

from examples.multistep_deletion.external_system import ExternalSystem
from kopf_outcomes_testing.process import summary
from tests.e2e.conftest import create_example, eventually, get_example

OPERATOR = "examples/multistep_deletion/example.py"
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"


@pytest.mark.parametrize("via", ["annotation", "status"])
async def test_deletion_waits_quietly_for_the_callback_and_completes_at_once(
    cluster, objects, namespace, operator, via,
):
    system = ExternalSystem(kubeconfig=str(cluster.admin_kubeconfig), delay=None, via=via)
    runner, url = await system.serve()
    try:
        async with operator(OPERATOR, EXTERNAL_SYSTEM_URL=url) as op:
            await create_example(objects, namespace, "seed")
            await eventually(lambda: _has_finalizer(objects, namespace), what="the finalizer")
            await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", "seed")

            await op.wait_for(lambda r: "is pending" in r.message, what="Pending")
            assert system.starts == [(namespace, "seed")]
            await asyncio.sleep(2)  # the object waits; nothing may happen meanwhile
            body = await get_example(objects, namespace, "seed")
            assert body is not None and FINALIZER in body["metadata"]["finalizers"]
            assert body["metadata"].get("deletionTimestamp")

            invoked_before = _count(op, "Handler 'delete_fn' is invoked.")
            called_back = time.monotonic()
            await system.call_back(namespace, "seed")
            record = await op.wait_for(lambda r: r.message == "Handler 'delete_fn' succeeded.",
                                       what="the handler to succeed after the callback")
            await eventually(lambda: _gone(objects, namespace), what="the object to be gone")
            rerun_latency = time.monotonic() - called_back

            records = op.records(f"{namespace}/seed")
            assert [r for r in records if r.level in ("ERROR", "CRITICAL")] == [], summary(records)
            assert _count(op, "Handler 'delete_fn' is invoked.") == invoked_before + 1
            assert record is not None
            assert rerun_latency < 5  # the loose end-to-end bound; the handler re-run is checked below
            invoked = [r for r in records if r.message == "Handler 'delete_fn' is invoked."]
            assert invoked[-1].time - called_back_wall(called_back) < 1.0
            assert system.starts == [(namespace, "seed")]  # started once, not per wake-up
    finally:
        await runner.cleanup()


def called_back_wall(monotonic_moment: float) -> float:
    """The wall-clock time of a monotonic moment (log records carry wall-clock times)."""
    return time.time() - (time.monotonic() - monotonic_moment)


def _count(op, message: str) -> int:
    return sum(1 for r in op.records() if r.message == message)


async def _has_finalizer(objects, namespace: str) -> bool:
    body = await get_example(objects, namespace, "seed")
    return body is not None and FINALIZER in (body["metadata"].get("finalizers") or [])


async def _gone(objects, namespace: str) -> bool:
    return await get_example(objects, namespace, "seed") is None
