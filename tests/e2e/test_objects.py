"""Handlers that wait on other objects (depends_on_objects) on the real API server: parked with no
writes, woken at once when one of them changes or goes, across a restart of the operator."""
from __future__ import annotations

import asyncio
import time

from kubernetes_asyncio import client

from kopf_outcomes_testing.cluster.audit import AuditLog
from tests.e2e.conftest import create_example, eventually, get_example
from tests.e2e.test_outcomes import runs

OPERATOR = "tests/e2e/operators/objects_operator.py"
PENDING = "Handler 'delete_fn' is pending: waiting for the children to go"
SECRET_AFTER = 30.0
HOLD = "test.kopf.dev/hold"  # the children's own finalizer: they go only when the test says


async def make_children(api, namespace: str, parent: dict, count: int) -> list[str]:
    core, names = client.CoreV1Api(api), []
    owner = {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "name": parent["metadata"]["name"],
             "uid": parent["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}  # as kopf.adopt
    for index in range(count):
        name = f"{parent['metadata']['name']}-child-{index}"
        await core.create_namespaced_config_map(namespace, {"metadata": {
            "name": name, "ownerReferences": [owner], "finalizers": [HOLD]}})
        names.append(name)
    return names


async def release_child(api, namespace: str, name: str) -> None:
    await client.CoreV1Api(api).patch_namespaced_config_map(
        name, namespace, [{"op": "remove", "path": "/metadata/finalizers"}],
        _content_type="application/json-patch+json")


async def finalizer_added(objects, namespace: str, name: str) -> bool:
    body = await get_example(objects, namespace, name)
    return body is not None and bool(body["metadata"].get("finalizers"))


async def test_a_deletion_waits_parked_for_its_children_and_wakes_as_each_goes(api, cluster, objects,
                                                                               namespace, operator):
    audit = AuditLog(cluster.audit_log)
    async with operator(OPERATOR) as op:
        parent = await create_example(objects, namespace, "p")
        children = await make_children(api, namespace, parent, 3)
        await eventually(lambda: finalizer_added(objects, namespace, "p"), what="the finalizer")
        await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", "p")
        await op.wait_for(lambda r: r.message == PENDING, what="Pending")
        await asyncio.sleep(1.5)  # the parking PATCH and its event
        mark = audit.mark()
        core = client.CoreV1Api(api)
        for name in children:  # deleting: each child now has a deletionTimestamp, and is still there
            await core.delete_namespaced_config_map(name, namespace)
        for name in children[:-1]:
            await release_child(api, namespace, name)
        await asyncio.sleep(2)
        assert await get_example(objects, namespace, "p") is not None  # one child remains
        assert audit.writes(since=mark, user_agent="kopf", namespace=namespace, name="p") == []
        woken = runs(op)
        assert woken >= 2  # the first run, and one or more as children went (close wake-ups may batch)
        started = time.monotonic()
        await release_child(api, namespace, children[-1])
        await eventually(lambda: _gone(objects, namespace, "p"), timeout=10, what="the parent to go")
        print(f"\nparent gone {time.monotonic() - started:.2f} s after its last child;"
              f" {runs(op)} runs; 0 writes while waiting")
        assert time.monotonic() - started < 2
        assert not [r for r in op.records() if r.level in ("ERROR", "CRITICAL")]
        pending = [r for r in op.records() if "is pending" in r.message and r.level == "INFO"]
        assert len({r.message for r in pending}) == len(pending)  # a repeated conclusion is not INFO again


async def test_a_creation_waits_for_the_secret_it_names(api, cluster, objects, namespace, operator):
    audit = AuditLog(cluster.audit_log)
    async with operator(OPERATOR) as op:
        await create_example(objects, namespace, "c", {"secretName": "creds"})
        await op.wait_for(lambda r: "is pending: waiting for the secret 'creds'" in r.message, what="Pending")
        await asyncio.sleep(1.5)  # the parking PATCH
        mark = audit.mark()
        await asyncio.sleep(SECRET_AFTER - 1.5)  # the secret comes 30 s after its parent
        assert audit.writes(since=mark, user_agent="kopf", namespace=namespace, name="c") == []
        assert runs(op, "create_fn") == 1
        started = time.monotonic()
        await client.CoreV1Api(api).create_namespaced_secret(namespace, {"metadata": {"name": "creds"}})
        await op.wait_for(lambda r: r.message == "Handler 'create_fn' succeeded.", what="the wake-up")
        print(f"\nwoken {time.monotonic() - started:.2f} s after the secret appeared")
        assert time.monotonic() - started < 1.0
        assert runs(op, "create_fn") == 2


async def test_a_child_gone_while_the_operator_was_down_wakes_its_parent_on_start(api, objects, namespace,
                                                                                   operator):
    parent = await create_example(objects, namespace, "r")
    children = await make_children(api, namespace, parent, 2)
    async with operator(OPERATOR) as op:
        await eventually(lambda: finalizer_added(objects, namespace, "r"), what="the finalizer")
        await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", "r")
        await op.wait_for(lambda r: r.message == PENDING, what="Pending")
        await asyncio.sleep(1.5)
        op.kill()
    core = client.CoreV1Api(api)
    for name in children:
        await core.delete_namespaced_config_map(name, namespace)
        await release_child(api, namespace, name)
    async with operator(OPERATOR):
        await eventually(lambda: _gone(objects, namespace, "r"), timeout=20, what="the parent to go")


async def _gone(objects, namespace: str, name: str) -> bool:
    return await get_example(objects, namespace, name) is None


async def test_the_example_deletes_its_children_and_waits_for_them(api, objects, namespace, operator):
    core = client.CoreV1Api(api)

    async def children() -> list[str]:
        listing = await core.list_namespaced_config_map(namespace)
        return [item.metadata.name for item in listing.items if item.metadata.name.startswith("x-")]

    async with operator("examples/wait_for_children/example.py") as op:
        await create_example(objects, namespace, "x", {"children": 3})
        await eventually(lambda: _count(children, 3), what="3 children")
        await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", "x")
        await eventually(lambda: _gone(objects, namespace, "x"), timeout=20, what="the parent to go")
        assert await children() == []
        assert not [r for r in op.records() if r.level in ("ERROR", "CRITICAL")]


async def _count(list_children, count: int) -> bool:
    return len(await list_children()) == count
