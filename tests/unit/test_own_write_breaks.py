"""
Attempts to break the rule on own writes (``_kopf/own_writes.py``, ``_kopf/reaction.py``), each
through Kopf's real processing on the one-object fake server (``one_object.py``): the first event
parks a create handler (``Pending``), so our memory is written and this process awaits the
resourceVersion that write returned; the view before it is then "older than our own write".
"""
from __future__ import annotations

import asyncio
import copy
import inspect
import logging
from collections.abc import Iterator
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import Pending
from kopf_outcomes._kopf.internals import operator_registry
from kopf_outcomes.memory import DEFAULT_KEYS
from tests.unit.kopf_objects import (
    NO_THROTTLING,
    application,
    cause_of,
    daemons,
    ephemera,
    execution,
    indexing,
    processing,
    run_handlers,
)
from tests.unit.one_object import FINALIZER, RESOURCE, NextEventWaiting, Operator, Server, server

__all__ = ["server"]

KOPF_RESOURCE = ("kopf.dev", "v1", "kopfexamples")
# Kopf's apply() returns the resourceVersion of its write after 1.37: only there is a write
# recorded and a view held; on 1.37 the tests that need no hold pass as stock Kopf does.
RULE_ACTIVE = "tuple" in str(inspect.signature(application.apply).return_annotation)
ONLY_WHERE_HELD = pytest.mark.skipif(
    not RULE_ACTIVE, reason="Kopf 1.37 returns no version of its write: no view is held there, an older "
    "view runs the handler as stock Kopf does (safety.md's limit)")


@pytest.fixture(autouse=True)
def installed(unpatched: None) -> Iterator[None]:
    kopf_outcomes.install(entry_points=False, events=False)
    yield


def living(uid: str = "u1") -> dict[str, Any]:
    """An object not being deleted, with Kopf's finalizer already added."""
    return {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "spec": {"a": 1},
            "metadata": {"name": "x", "namespace": "ns", "uid": uid, "resourceVersion": "1",
                         "finalizers": [FINALIZER]}}


async def process(op: Operator, body: dict[str, Any]) -> None:
    """Kopf processes this view of the object (not necessarily the server's latest)."""
    known = operator_registry.set(op.registry)
    try:
        await asyncio.wait_for(processing.process_resource_event(
            lifecycle=op.lifecycle, indexers=indexing.OperatorIndexers(),
            registry=op.registry, settings=op.settings, memories=op.memories, memobase=ephemera.Memo(),
            resource=RESOURCE, raw_event={"type": "MODIFIED", "object": copy.deepcopy(body)},
            event_queue=asyncio.Queue(), stream_pressure=NextEventWaiting(), **NO_THROTTLING), timeout=30)
    finally:
        operator_registry.reset(known)


async def parked_on_create(server: Server, registry: kopf.OperatorRegistry,
                           acted: list[bool] | None = None) -> tuple[Operator, dict[str, Any]]:
    """The create handler parks on the first event: our memory is written. Returns the operator and
    the view before that write (one Kopf processes after its wait for its own write, say); each run
    of the handler appends its ``acted_on_this_state`` to ``acted``."""
    @kopf.on.create(*KOPF_RESOURCE, registry=registry, id="parks")
    def parks(**_: Any) -> Pending:
        if acted is not None:
            acted.append(kopf_outcomes.recall().acted_on_this_state)
        return Pending("waiting for the callback")

    @kopf.on.delete(*KOPF_RESOURCE, registry=registry, id="cleans")
    def cleans(**_: Any) -> None:
        pass  # keeps Kopf's finalizer required

    server.body = living()
    older = copy.deepcopy(server.body)
    op = Operator(server, registry)
    await process(op, server.body)
    assert DEFAULT_KEYS.memory in server.annotations  # our memory written: its version awaited
    return op, older


# --- timers and daemons: a held cycle in Kopf's in-memory loops -----------------------------------

async def calls_before_yielding(kind: str, op: Operator, older: dict[str, Any], handler_id: str,
                                monkeypatch: pytest.MonkeyPatch) -> int:
    """Kopf's own timer or daemon task of the handler, its live body the view before our write: how
    many times it runs the handlers before it first yields to the event loop (stopped at 20, or the
    test would hang as the operator does)."""
    handler: Any = next(h for h in op.registry._spawning.get_all_handlers() if str(h.id) == handler_id)
    cause = cause_of(kind, older, logging.getLogger(__name__))
    installed = execution.execute_handlers_once
    calls: list[int] = []

    async def counted(**kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) >= 20:
            cause.stopper.set(reason=daemons.stoppers.DaemonStoppingReason.OPERATOR_EXITING)
        return await installed(**kwargs)

    monkeypatch.setattr(execution, "execute_handlers_once", counted)
    known = operator_registry.set(op.registry)
    try:
        task = asyncio.create_task(
            daemons._timer(settings=op.settings, handler=handler, memory=daemons.DaemonsMemory(), cause=cause)
            if kind == "timer" else daemons._daemon(settings=op.settings, handler=handler, cause=cause))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        before_yielding = len(calls)
        cause.stopper.set(reason=daemons.stoppers.DaemonStoppingReason.OPERATOR_EXITING)
        await asyncio.wait_for(task, timeout=10)
    finally:
        operator_registry.reset(known)
    return before_yielding


async def test_a_timer_on_a_view_older_than_our_write_does_not_spin(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """A timer keeps no memory, so its attempt is not held: held, with no outcome and no delay,
    Kopf's ``_timer`` called it again at once without yielding, and the operator hung."""
    registry = kopf.OperatorRegistry()

    @kopf.timer(*KOPF_RESOURCE, interval=60, registry=registry, id="ticks")
    def ticks(**_: Any) -> None:
        pass

    op, older = await parked_on_create(server, registry)
    assert await calls_before_yielding("timer", op, older, "ticks", monkeypatch) == 1  # then it sleeps


async def test_a_daemon_on_a_view_older_than_our_write_does_not_spin(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """As the timer: a held daemon attempt looped in Kopf's ``_daemon`` without yielding."""
    registry = kopf.OperatorRegistry()

    @kopf.daemon(*KOPF_RESOURCE, registry=registry, id="lives")
    async def lives(stopped: Any, **_: Any) -> None:
        await stopped.wait()

    op, older = await parked_on_create(server, registry)
    assert await calls_before_yielding("daemon", op, older, "lives", monkeypatch) == 1  # it runs, and awaits


# --- what the held cycle's dropped patch carried --------------------------------------------------

async def test_a_stock_event_handlers_patch_in_a_held_cycle_lands(server: Server) -> None:
    """Stock parity: only what the held change cycle adds to the patch is dropped, not what a stock
    ``@kopf.on.event`` handler of the same event wrote before it (the whole patch was dropped)."""
    registry = kopf.OperatorRegistry()
    seen: list[str] = []

    @kopf.on.event(*KOPF_RESOURCE, registry=registry, id="labels")
    def labels(body: Any, patch: kopf.Patch, **_: Any) -> None:
        seen.append(body["metadata"]["resourceVersion"])
        patch.metadata.labels["events"] = str(len(seen))

    op, older = await parked_on_create(server, registry)
    assert server.body["metadata"]["labels"] == {"events": "1"}
    await process(op, older)  # the view before our write, after Kopf's wait for it
    assert seen == ["1", "1"]  # the event handler ran on it
    assert server.body["metadata"]["labels"] == {"events": "2"}  # and its write landed, as in stock Kopf


@ONLY_WHERE_HELD
async def test_a_webhook_request_without_a_resource_version_does_not_end_the_wait_for_our_write(
        server: Server) -> None:
    """An admission request's object without a resourceVersion (an unconditional PUT) ended the wait
    for our write (a webhook cycle reached the rule, and a view it could not place deleted the awaited
    version): the older view after it ran the parked handler again, ``acted_on_this_state`` False."""
    registry = kopf.OperatorRegistry()
    acted: list[bool] = []

    @kopf.on.mutate(*KOPF_RESOURCE, registry=registry, id="mutates")
    def mutates(**_: Any) -> None:
        pass

    op, older = await parked_on_create(server, registry, acted)
    assert acted == [False]
    unconditional = copy.deepcopy(server.body)
    del unconditional["metadata"]["resourceVersion"]
    webhook: Any = next(iter(registry._webhooks.get_all_handlers()))
    known = operator_registry.set(registry)
    try:
        await run_handlers([webhook], cause_of("webhook", unconditional, logging.getLogger(__name__)))
    finally:
        operator_registry.reset(known)
    await process(op, older)  # the view before our write, after Kopf's wait for it
    assert acted == [False]  # held: the parked handler did not start again on a view without its record


# --- guards: what holds ----------------------------------------------------------------------------

async def test_stock_handlers_alone_write_no_memory_so_an_older_view_runs_them_as_stock_kopf_does(
        server: Server) -> None:
    """Stock parity: with no outcome in use, nothing of ours is written, no version awaited, and an
    older view (after Kopf's wait for its own write) runs the stock handler again, as without us."""
    registry = kopf.OperatorRegistry()
    runs: list[str] = []

    @kopf.on.create(*KOPF_RESOURCE, registry=registry, id="stock")
    def stock(body: Any, **_: Any) -> None:
        runs.append(body["metadata"]["resourceVersion"])

    @kopf.on.delete(*KOPF_RESOURCE, registry=registry, id="cleans")
    def cleans(**_: Any) -> None:
        pass

    server.body = living()
    older = copy.deepcopy(server.body)
    op = Operator(server, registry)
    await process(op, server.body)
    assert DEFAULT_KEYS.memory not in server.annotations
    await process(op, older)
    assert runs == ["1", "1"]


@ONLY_WHERE_HELD
async def test_kopfs_purge_of_another_purposes_progress_from_an_older_view_is_not_written(server: Server) -> None:
    """Kopf purges every handler's progress where the view's progress holds another purpose (an
    update's, here), before the change cycle begins: from a view older than our write, that purge
    would delete the parked mark our write recorded; so there the held cycle's whole patch goes."""
    registry = kopf.OperatorRegistry()
    acted: list[bool] = []
    op, older = await parked_on_create(server, registry, acted)
    parked = {key: value for key, value in server.annotations.items() if key.startswith("kopf.zalando.org/parks")}
    assert parked  # Kopf's progress of the parked handler, in its annotations storage
    older["metadata"]["annotations"] = {  # an earlier attempt's progress, and an update's record
        "kopf.zalando.org/parks": '{"started": "2020-01-01T00:00:00", "purpose": "create", "retries": 1}',
        "kopf.zalando.org/cleans": '{"started": "2020-01-01T00:00:00", "purpose": "update"}'}
    await process(op, older)
    assert acted == [False]
    assert {key: server.annotations.get(key) for key in parked} == parked
