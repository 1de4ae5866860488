"""Real operators' shapes on the real API server (issue 29): children found by a label whose
value is the parent's name wake only their own parent; a Secret referenced in another namespace
is found and wakes the parent that waits for it."""
from __future__ import annotations

import asyncio
import time
import uuid

from kubernetes_asyncio import client

from kopf_outcomes_testing.process import OperatorProcess
from tests.e2e.conftest import ROOT, create_example, eventually, get_example
from tests.e2e.test_objects import finalizer_added

OPERATOR = "tests/e2e/operators/shapes_operator.py"
LABEL = "example.com/cluster"


def invoked(op: OperatorProcess, namespace: str, name: str, handler: str = "delete_fn") -> int:
    return sum(1 for r in op.records() if r.message == f"Handler {handler!r} is invoked."
               and r.object == f"{namespace}/{name}")


async def gone(objects, namespace: str, name: str) -> bool:
    return await get_example(objects, namespace, name) is None


async def test_a_parents_children_by_its_name_wake_it_and_no_other(api, objects, namespace, operator):
    core = client.CoreV1Api(api)
    async with operator(OPERATOR) as op:
        for name in ("a", "b"):
            await create_example(objects, namespace, name)
            await core.create_namespaced_config_map(namespace, {"metadata": {
                "name": f"{name}-cleanup", "labels": {LABEL: name}}})
        for name in ("a", "b"):
            await eventually(lambda name=name: finalizer_added(objects, namespace, name), what="the finalizer")
            await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", name)
        await op.wait_for(lambda r: "is pending: waiting for the cluster's configmaps" in r.message
                          and r.object == f"{namespace}/a", what="a waits")
        await op.wait_for(lambda r: "is pending: waiting for the cluster's configmaps" in r.message
                          and r.object == f"{namespace}/b", what="b waits")
        before = invoked(op, namespace, "a")
        started = time.monotonic()
        await core.delete_namespaced_config_map("b-cleanup", namespace)
        await eventually(lambda: gone(objects, namespace, "b"), timeout=10, what="b to go")
        assert time.monotonic() - started < 2
        assert await get_example(objects, namespace, "a") is not None  # its own configmap is there
        assert invoked(op, namespace, "a") == before  # was: every child event woke every parent
        await core.delete_namespaced_config_map("a-cleanup", namespace)
        await eventually(lambda: gone(objects, namespace, "a"), timeout=10, what="a to go")
        assert not [r for r in op.records() if r.level in ("ERROR", "CRITICAL")]


async def test_a_secret_referenced_in_another_namespace_is_found(api, cluster, objects, namespace):
    core = client.CoreV1Api(api)
    other = f"secrets-{uuid.uuid4().hex[:8]}"
    await core.create_namespace({"metadata": {"name": other}})
    try:
        # The operator watches both namespaces (or --all-namespaces): the Secrets are indexed there.
        async with OperatorProcess(ROOT / OPERATOR, namespace, kubeconfig=str(cluster.admin_kubeconfig),
                                   extra_args=["--namespace", other], cwd=ROOT) as op:
            await create_example(objects, namespace, "c", {"secretRef": {"name": "creds", "namespace": other}})
            await op.wait_for(lambda r: "is pending: waiting for the secret" in r.message, what="Pending")
            await core.create_namespaced_secret(namespace, {"metadata": {"name": "creds"}})  # not this one
            await asyncio.sleep(1)
            assert invoked(op, namespace, "c", "create_fn") == 1
            started = time.monotonic()
            await core.create_namespaced_secret(other, {"metadata": {"name": "creds"}})
            await op.wait_for(lambda r: r.message == "Handler 'create_fn' succeeded.", timeout=10,
                              what="the wake-up")
            assert time.monotonic() - started < 2  # was: never found (waits for a recheck)
            assert invoked(op, namespace, "c", "create_fn") == 2
    finally:
        await core.delete_namespace(other)
