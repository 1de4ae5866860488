"""
docs/howto/remove.md on the real API server: what stock Kopf does with an object that
kopf-outcomes parked, and that both documented ways out release it.
"""
from __future__ import annotations

import asyncio
import datetime
import json
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kopf_outcomes_testing import ClusterInfo, OperatorProcess

OPERATORS = Path(__file__).parent / "operators"
ARGS = ("kopf.dev", "v1")
MEMORY = "outcomes.kopf.zalando.org/memory"
PROGRESS = "kopf.zalando.org/delete_fn"
MERGE = "application/merge-patch+json"


def operator(cluster: ClusterInfo, namespace: str, name: str) -> OperatorProcess:
    return OperatorProcess(OPERATORS / name, namespace, kubeconfig=str(cluster.admin_kubeconfig),
                           env={"KOPF_OUTCOMES_PLUGINS": ""})


async def get(objects: client.CustomObjectsApi, namespace: str) -> dict[str, Any] | None:
    try:
        body: dict[str, Any] = await objects.get_namespaced_custom_object(*ARGS, namespace, "kopfexamples", "obj")
    except ApiException as e:
        if e.status == 404:
            return None
        raise
    return body


async def annotate(objects: client.CustomObjectsApi, namespace: str, **annotations: str | None) -> None:
    await objects.patch_namespaced_custom_object(*ARGS, namespace, "kopfexamples", "obj",
                                                 {"metadata": {"annotations": annotations}}, _content_type=MERGE)


async def gone(objects: client.CustomObjectsApi, namespace: str, timeout: float = 30) -> bool:
    for _ in range(int(timeout * 10)):
        if await get(objects, namespace) is None:
            return True
        await asyncio.sleep(0.1)
    return False


async def park(cluster: ClusterInfo, objects: client.CustomObjectsApi, namespace: str) -> None:
    """Under kopf-outcomes: create the object, delete it, let the handler park; stop the operator."""
    async with operator(cluster, namespace, "parked.py") as op:
        await objects.create_namespaced_custom_object(*ARGS, namespace, "kopfexamples", {
            "apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "obj"}, "spec": {}})
        await op.wait_for(lambda r: r.message.startswith("Handling cycle is finished"), what="the finalizer")
        await objects.delete_namespaced_custom_object(*ARGS, namespace, "kopfexamples", "obj")
        await op.wait_for(lambda r: r.message == "Handler 'delete_fn' is pending: waiting for example.com/done")
        await asyncio.sleep(0.5)  # the patch of the progress and the memory
    body = await get(objects, namespace)
    assert body is not None and json.loads(body["metadata"]["annotations"][MEMORY])["delete_fn"]["outcome"] == "pending"


def delayed_by(body: dict[str, Any]) -> float:
    progress = json.loads(body["metadata"]["annotations"][PROGRESS])
    delayed = datetime.datetime.fromisoformat(progress["delayed"])
    return (delayed - datetime.datetime.now(datetime.timezone.utc)).total_seconds()


async def test_stock_kopf_keeps_a_parked_object_until_its_progress_is_deleted(
        k8s_cluster: ClusterInfo, k8s_api: Any, k8s_namespace: str) -> None:
    objects = client.CustomObjectsApi(k8s_api)
    await park(k8s_cluster, objects, k8s_namespace)
    async with operator(k8s_cluster, k8s_namespace, "stock.py") as op:
        await annotate(objects, k8s_namespace, **{"example.com/done": "yes"})  # a change: ignored
        await op.wait_for(lambda r: "(capped 600) seconds for the delayed handlers" in r.message,
                          what="Kopf sleeping for the ten-year delay in 10-minute steps")
        assert not [r for r in op.records() if r.message == "Handler 'delete_fn' is invoked."]
        body = await get(objects, k8s_namespace)
        assert body is not None and delayed_by(body) > 5 * 365 * 24 * 3600

        await annotate(objects, k8s_namespace, **{PROGRESS: None, MEMORY: None})  # the way out
        assert await gone(objects, k8s_namespace), op.text()[-3000:]
        assert [r for r in op.records() if r.message == "Handler 'delete_fn' succeeded."]


async def test_the_new_code_deployed_with_the_library_still_installed_unparks(
        k8s_cluster: ClusterInfo, k8s_api: Any, k8s_namespace: str) -> None:
    objects = client.CustomObjectsApi(k8s_api)
    await park(k8s_cluster, objects, k8s_namespace)
    async with operator(k8s_cluster, k8s_namespace, "transition.py") as op:
        await annotate(objects, k8s_namespace, **{"example.com/wake": "1"})
        await op.wait_for(lambda r: r.message == "Handler 'delete_fn' failed temporarily: waiting for example.com/done")
        await asyncio.sleep(0.5)
    body = await get(objects, k8s_namespace)
    assert body is not None
    assert MEMORY not in body["metadata"]["annotations"]  # no record left: nothing parked
    assert delayed_by(body) < 60  # an ordinary delay, which stock Kopf honours

    async with operator(k8s_cluster, k8s_namespace, "stock.py") as op:  # kopf-outcomes removed
        await annotate(objects, k8s_namespace, **{"example.com/done": "yes"})
        assert await gone(objects, k8s_namespace), op.text()[-3000:]
