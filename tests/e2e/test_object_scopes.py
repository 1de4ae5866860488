"""
Which objects a handler's sources see, and which objects a shard refuses, on the real API server
(issue 41 findings 2 and 4, issue 43 finding 3): a reference into a namespace the operator does
not watch holds the deletion (it was read as absent, and the finalizer went); a shard releases the
objects of a resource it does not shard (it kept their finalizers forever); a Job that two sources
name keeps the first source's fields, so its success wakes the parked handler (it never ran again).
"""
from __future__ import annotations

import asyncio
from typing import Any

from kubernetes_asyncio import client

from kopf_outcomes_testing.namespaces import create_namespace, delete_namespace
from kopf_outcomes_testing.process import OperatorProcess
from tests.e2e.conftest import create_example, eventually, get_example
from tests.e2e.test_outcomes import FINALIZER

OPERATOR = "tests/e2e/operators/scopes_operator.py"
SHARD_LABEL = "kopf-outcomes.example.com/shard"
PARENT_LABEL = "kopf-outcomes.example.com/parent"
HELD = 2.0  # seconds the parent must stay (a release takes < 0.1 s)


def errors(op: OperatorProcess) -> list[str]:
    return [r.message for r in op.records() if r.level in ("ERROR", "CRITICAL")]


async def _has_finalizer(objects: Any, namespace: str, name: str) -> bool:
    body = await get_example(objects, namespace, name)
    return FINALIZER in ((body or {}).get("metadata", {}).get("finalizers") or [])


async def test_a_reference_into_an_unwatched_namespace_keeps_the_finalizer(
        cluster, api, objects, namespace, operator) -> None:
    admin = cluster.admin_client()
    vault = create_namespace(admin, prefix=f"{namespace}-vault-")
    try:
        await client.CoreV1Api(api).create_namespaced_secret(vault, {"metadata": {"name": "lock"}})
        async with operator(OPERATOR, SCOPES_MODE="reference") as op:  # --namespace=<the parent's> only
            await create_example(objects, namespace, "p", {"lockRef": f"{vault}/lock"})
            await eventually(lambda: _has_finalizer(objects, namespace, "p"), what="the finalizer")
            await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", "p")
            await op.wait_for(lambda r: "does not watch them" in r.message, what="the ERROR")
            await asyncio.sleep(HELD)
            # Was: the Secret read as absent, the handler done, the finalizer released.
            assert await _has_finalizer(objects, namespace, "p")
            assert not any(r.message == "Handler 'delete_fn' is invoked." for r in op.records())
            [error] = errors(op)
            assert f"v1/secrets in namespace {vault!r} (watched in {namespace!r})" in error
            assert "--namespace for that namespace too, or with --all-namespaces" in error
            await objects.patch_namespaced_custom_object(  # the way out: let go of the reference
                "kopf.dev", "v1", namespace, "kopfexamples", "p", {"spec": {"lockRef": "lock"}},
                _content_type="application/merge-patch+json")
            await eventually(lambda: _gone(objects, namespace, "p"), timeout=10, what="the parent to go")
    finally:
        delete_namespace(admin, vault)


async def _gone(objects: Any, namespace: str, name: str) -> bool:
    return await get_example(objects, namespace, name) is None


async def test_a_shard_releases_an_object_of_a_resource_it_does_not_shard(api, namespace, operator) -> None:
    core = client.CoreV1Api(api)

    async def configmap() -> Any:
        try:
            return await core.read_namespaced_config_map("plain", namespace)
        except client.ApiException as e:
            if e.status == 404:
                return None
            raise

    async with operator(OPERATOR, SCOPES_MODE="shard") as op:
        await core.create_namespaced_config_map(namespace, {"metadata": {"name": "plain"}})
        await eventually(lambda: _configmap_finalized(configmap), what="the ConfigMap's finalizer")
        await core.delete_namespaced_config_map("plain", namespace)
        # Was: the handler ran, and the finalizer stayed forever (no shard label: "another shard's").
        await eventually(lambda: _absent(configmap), timeout=10, what="the ConfigMap to go")
        assert any(r.message == "Handler 'delete_configmap' succeeded." for r in op.records())
        assert errors(op) == []


async def _configmap_finalized(read: Any) -> bool:
    found = await read()
    return found is not None and FINALIZER in (found.metadata.finalizers or [])


async def _absent(read: Any) -> bool:
    return await read() is None


async def test_a_job_that_two_sources_name_wakes_the_parked_handler_when_it_succeeds(
        api, objects, namespace, operator) -> None:
    batch = client.BatchV1Api(api)
    async with operator(OPERATOR, SCOPES_MODE="jobs") as op:
        parent = await create_example(objects, namespace, "p")
        await batch.create_namespaced_job(namespace, {
            "metadata": {"name": "cleanup", "labels": {PARENT_LABEL: "p"}, "ownerReferences": [{
                "apiVersion": "kopf.dev/v1", "kind": "KopfExample", "name": "p",
                "uid": parent["metadata"]["uid"]}]},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "c", "image": "busybox"}]}}}})
        await eventually(lambda: _has_finalizer(objects, namespace, "p"), what="the finalizer")
        await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", "p")
        await op.wait_for(lambda r: r.message == "Handler 'delete_fn' is pending: the cleanup Jobs run",
                          what="Pending")
        await asyncio.sleep(HELD)
        assert await get_example(objects, namespace, "p") is not None
        await batch.patch_namespaced_job_status("cleanup", namespace, {"status": {"succeeded": 1}})
        # Was: the label source's fields dropped (owned last): the success changed nothing, and
        # the handler (after an IndexError on ref.fields[0]) never saw it.
        await eventually(lambda: _gone(objects, namespace, "p"), timeout=10, what="the parent to go")
        seen = [r.message for r in op.records() if r.message.startswith("Jobs and their fields")]
        assert seen[0] == "Jobs and their fields: [('cleanup', (None,))]"
        assert seen[-1] == "Jobs and their fields: [('cleanup', (1,))]"
        assert errors(op) == []
