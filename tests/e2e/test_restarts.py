"""Operator killed with SIGKILL while objects are parked: memory is read back from the objects."""
from __future__ import annotations

import asyncio

from examples.multistep_deletion.external_system import ExternalSystem
from tests.e2e.conftest import create_example, eventually, get_example

OPERATOR = "examples/multistep_deletion/example.py"
NAMES = ["k1", "k2", "k3"]


def runs(op, name: str) -> int:
    return sum(1 for r in op.records() if r.message == "Handler 'delete_fn' is invoked."
               and r.object and r.object.endswith(f"/{name}"))


async def test_sigkill_while_parked_then_callbacks_while_down(cluster, objects, namespace, operator):
    system = ExternalSystem(kubeconfig=str(cluster.admin_kubeconfig), delay=None, via="status")
    runner, url = await system.serve()
    try:
        first = operator(OPERATOR, EXTERNAL_SYSTEM_URL=url)
        async with first:
            for name in NAMES + ["unchanged"]:
                await create_example(objects, namespace, name)
            await asyncio.sleep(1.5)  # finalizers added
            for name in NAMES + ["unchanged"]:
                await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", name)
            await eventually(lambda: asyncio.sleep(0, len(system.starts) == 4), what="all started")
            await asyncio.sleep(1)  # the Pending patches are written
            first.kill()

        for name in NAMES:  # the external system calls back while the operator is down
            await system.call_back(namespace, name)

        second = operator(OPERATOR, EXTERNAL_SYSTEM_URL=url)
        async with second:
            for name in NAMES:
                await eventually(lambda name=name: _gone(objects, namespace, name), what=f"{name} to go")
            await asyncio.sleep(2)
            assert runs(second, "unchanged") == 0  # parked, state unchanged: no re-run on start
            assert await get_example(objects, namespace, "unchanged") is not None
            await system.call_back(namespace, "unchanged")
            await eventually(lambda: _gone(objects, namespace, "unchanged"), what="the last one to go")
            assert not [r for r in second.records() if r.level in ("ERROR", "CRITICAL")]

        # Each object's external process was started exactly once, across the crash.
        assert sorted(system.starts) == sorted((namespace, name) for name in NAMES + ["unchanged"])
    finally:
        await runner.cleanup()


async def _gone(objects, namespace: str, name: str) -> bool:
    return await get_example(objects, namespace, name) is None
