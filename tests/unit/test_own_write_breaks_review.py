"""
A reviewer's attempts to break the rule on own writes (``_kopf/own_writes.py``, ``_kopf/reaction.py``,
``_kopf/wrappers.py``) through Kopf's real processing on the one-object fake server, as in
``test_own_write_breaks.py``: the first event parks a create handler (``Pending``), so our memory is
written and this process awaits the resourceVersion that write returned.
"""
from __future__ import annotations

import asyncio
import copy
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import Pending
from kopf_outcomes._kopf import requeue
from kopf_outcomes._kopf.internals import operator_registry
from tests.unit.kopf_objects import NO_THROTTLING, api, ephemera, execution, indexing, processing
from tests.unit.one_object import RESOURCE, NextEventWaiting, Operator, Server, server
from tests.unit.test_own_write_breaks import (
    KOPF_RESOURCE,
    ONLY_WHERE_HELD,
    installed,
    living,
    parked_on_create,
    process,
)

__all__ = ["installed", "server"]

# Python refuses int() of a decimal string longer than this (sys.get_int_max_str_digits()).
OVERSIZE = "1" + "0" * 4300


async def test_an_oversize_resource_version_of_another_object_does_not_fail_its_cycle(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """A view whose resourceVersion is all digits but longer than Python converts (not etcd's, but a
    storage's or a proxy's bad value) is one the rule cannot place: left to Kopf, as an opaque one."""
    registry = kopf.OperatorRegistry()
    acted: list[bool] = []
    op, _ = await parked_on_create(server, registry, acted)  # object u1's write is awaited
    stock_patch = api.patch

    async def patched(**kwargs: Any) -> Any:  # the fake server, for versions it cannot add 1 to
        version = server.body["metadata"]["resourceVersion"]
        server.body["metadata"]["resourceVersion"] = "1"
        result = await stock_patch(**kwargs)
        server.body["metadata"]["resourceVersion"] = result["metadata"]["resourceVersion"] = version + "1"
        return result

    monkeypatch.setattr(api, "patch", patched)
    server.body = living(uid="u2")
    server.body["metadata"]["resourceVersion"] = OVERSIZE
    await process(op, server.body)
    assert acted == [False, False]  # u2's create handler ran, as on any view the rule cannot place


async def test_a_stock_event_handlers_write_lands_where_kopf_purged_the_older_view(server: Server) -> None:
    registry = kopf.OperatorRegistry()
    seen: list[str] = []

    @kopf.on.event(*KOPF_RESOURCE, registry=registry, id="labels")
    def labels(body: Any, patch: kopf.Patch, **_: Any) -> None:
        seen.append(body["metadata"]["resourceVersion"])
        patch.metadata.labels["events"] = str(len(seen))

    op, older = await parked_on_create(server, registry)
    older["metadata"]["annotations"] = {  # an earlier attempt's progress, and an update's: Kopf purges
        "kopf.zalando.org/parks": '{"started": "2020-01-01T00:00:00", "purpose": "create", "retries": 1}',
        "kopf.zalando.org/cleans": '{"started": "2020-01-01T00:00:00", "purpose": "update"}'}
    await process(op, older)
    assert seen == ["1", "1"]  # the event handler ran on the older view
    assert server.body["metadata"]["labels"] == {"events": "2"}  # and its write landed, as in stock Kopf


@ONLY_WHERE_HELD
async def test_a_held_cycle_run_in_a_task_of_its_own_writes_nothing(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = kopf.OperatorRegistry()
    acted: list[bool] = []
    op, older = await parked_on_create(server, registry, acted)
    parked = {key: value for key, value in server.annotations.items() if key.startswith("kopf.zalando.org/parks")}
    installed_cycle = execution.execute_handlers_once

    async def in_a_task_of_its_own(**kwargs: Any) -> Any:  # a tool's wrapper of Kopf's cycle
        return await asyncio.create_task(installed_cycle(**kwargs))

    monkeypatch.setattr(execution, "execute_handlers_once", in_a_task_of_its_own)
    await process(op, older)  # the view before our write, after Kopf's wait for it
    assert acted == [False]  # held: nothing ran on it
    assert {key: server.annotations.get(key) for key in parked} == parked  # nor was Kopf's progress from it written
    await process(op, server.body)  # our write's own view: the parked handler waits on, nothing changed
    assert acted == [False]



async def listed(op: Operator, body: dict[str, Any]) -> None:
    """Kopf lists the object (its watch began anew), in its worker as Kopf's listing reaches it."""
    raw_event = {"type": None, "object": copy.deepcopy(body)}
    known = operator_registry.set(op.registry)
    stream = requeue._stream.set(requeue.Stream(asyncio.Queue(), raw_event))  # as wrap_worker sets it
    try:
        await asyncio.wait_for(processing.process_resource_event(
            lifecycle=op.lifecycle, indexers=indexing.OperatorIndexers(),
            registry=op.registry, settings=op.settings, memories=op.memories, memobase=ephemera.Memo(),
            resource=RESOURCE, raw_event=raw_event, event_queue=asyncio.Queue(),
            stream_pressure=NextEventWaiting(), **NO_THROTTLING), timeout=30)
    finally:
        requeue._stream.reset(stream)
        operator_registry.reset(known)


async def test_views_after_the_clusters_versions_went_back_are_not_held_for_ever(server: Server) -> None:
    """etcd restored from a snapshot (without ``--bump-revision``): the object's versions start again
    below the one our write returned (the snapshot is from before that write), and reach it only after
    as many writes again in the whole cluster. Every view until then, a relisting's too (a listing is
    current by definition), is held: its handlers do not run, for hours or days, and nothing says why."""
    registry = kopf.OperatorRegistry()
    acted: list[bool] = []

    @kopf.on.create(*KOPF_RESOURCE, registry=registry, id="parks")
    def parks(**_: Any) -> Pending:
        acted.append(kopf_outcomes.recall().acted_on_this_state)
        return Pending("waiting for the callback")

    @kopf.on.delete(*KOPF_RESOURCE, registry=registry, id="cleans")
    def cleans(**_: Any) -> None:
        pass  # keeps Kopf's finalizer required

    server.body = living()
    server.body["metadata"]["resourceVersion"] = "1000"
    snapshot = copy.deepcopy(server.body)  # etcd's snapshot: before our write
    op = Operator(server, registry)
    await process(op, server.body)
    assert acted == [False] and server.body["metadata"]["resourceVersion"] == "1001"  # our write: awaited
    server.body = snapshot  # Kopf's watch fails on the versions gone back: it lists the objects again
    server.body["metadata"]["resourceVersion"] = "500"  # the snapshot's revision
    await listed(op, server.body)
    for _ in range(3):  # people change the object: each change a new version, still below our write's
        server.body["spec"]["a"] += 1
        server.body["metadata"]["resourceVersion"] = str(int(server.body["metadata"]["resourceVersion"]) + 1)
        await process(op, server.body)
    assert acted[:2] == [False, False]  # the handler ran on the restored state (its memory is gone with it)
