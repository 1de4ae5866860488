"""
What the operator writes itself never wakes a parked handler, in this process or the next one:
the handler's own status writes, its observers' writes (named or not), the results of every
registered handler (timers included), and the progress of a custom progress storage.
"""

from __future__ import annotations

import json
import logging
from collections.abc import MutableMapping
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import HandlerRun, Outcome, Pending, hookimpl
from kopf_outcomes._kopf.internals import operator_registry
from tests.unit.kopf_objects import body_after, changing_cause, handler, parked_state, run_handlers
from tests.unit.test_patched_execution import BODY, Counted


@pytest.fixture
def installed(unpatched: None) -> Any:
    return kopf_outcomes.install(entry_points=False)


def writing(values: list[object]) -> Counted:
    """A handler that writes the next of ``values`` into its status on every run, and waits."""
    counted = Counted(lambda: None)

    async def fn(patch: kopf.Patch, **_: Any) -> Outcome:
        counted.calls += 1
        patch.status["deletion"] = {"requested": values[min(counted.calls, len(values)) - 1]}
        return Pending("waiting for the callback")

    counted.fn = fn
    return counted


async def park_and_replay(fn: Counted, logger: logging.Logger) -> Any:
    """Park the handler, then replay the next event (the object as patched): its outcomes."""
    h = handler(fn.fn)
    cause = changing_cause(BODY, logger)
    outcomes = await run_handlers([h], cause)
    assert fn.calls == 1
    return await run_handlers([h], changing_cause(body_after(cause), logger), parked_state([h], outcomes))


async def test_a_handlers_own_changing_status_write_does_not_wake_it(installed: Any, logger: logging.Logger) -> None:
    fn = writing(["12:00:00", "12:00:05"])
    assert await park_and_replay(fn, logger) == {}
    assert fn.calls == 1


async def test_the_idempotency_key_is_the_same_before_and_after_the_handlers_own_write(
        installed: Any, logger: logging.Logger) -> None:
    keys: list[tuple[bool, str]] = []

    async def fn(patch: kopf.Patch, **_: Any) -> Outcome:
        memory = kopf_outcomes.recall()
        keys.append((memory.acted_on_this_state, memory.idempotency_key))
        patch.status["deletion"] = {"requested": len(keys)}
        return Pending("waiting")

    h = handler(fn)
    cause = changing_cause(BODY, logger)
    outcomes = await run_handlers([h], cause)
    killed_before_the_patch = changing_cause(BODY, logger)  # the same state again, nothing stored
    await run_handlers([h], killed_before_the_patch)
    after = changing_cause(body_after(cause), logger)  # the patch landed; a restart re-runs it
    await run_handlers([h], after, parked_state([h], outcomes).__class__.from_scratch().with_handlers([h]))
    assert keys[0] == keys[1] and keys[0][0] is False  # one key for the one state it acted on
    assert keys[2][0] is True  # the patched object is the state it acted on: no second start


class UnnamedWriter:
    """An observer that writes a changing field and does not name it in owned_fields."""

    count = 0

    @hookimpl
    def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]) -> None:
        UnnamedWriter.count += 1
        patch.setdefault("status", {})["observedAt"] = UnnamedWriter.count


async def test_an_observers_unnamed_write_does_not_wake_it_even_in_a_new_process(
        unpatched: None, logger: logging.Logger) -> None:
    kopf_outcomes.install(entry_points=False, plugins=[UnnamedWriter()])
    h = handler(writing(["a"]).fn)
    cause = changing_cause(BODY, logger)
    outcomes = await run_handlers([h], cause)
    kopf_outcomes.uninstall()  # a restart: nothing learned in the last process
    kopf_outcomes.install(entry_points=False, plugins=[UnnamedWriter()])
    assert await run_handlers([h], changing_cause(body_after(cause), logger), parked_state([h], outcomes)) == {}


async def test_the_results_of_every_registered_handler_are_the_operators_writes(
        installed: Any, logger: logging.Logger) -> None:
    registry = kopf.OperatorRegistry()

    @kopf.timer("kopf.dev", "v1", "kopfexamples", interval=1, registry=registry, id="ticker")
    def ticker(**_: Any) -> str:
        return "tick"

    token = operator_registry.set(registry)  # as the object's worker knows it
    try:
        fn = writing(["a"])
        h = handler(fn.fn)
        cause = changing_cause(BODY, logger)
        outcomes = await run_handlers([h], cause)
        next_body = body_after(cause)
        next_body["status"]["ticker"] = "a timer's result"  # Kopf's delivery of the timer's result
        assert await run_handlers([h], changing_cause(next_body, logger), parked_state([h], outcomes)) == {}
    finally:
        operator_registry.reset(token)


@pytest.mark.parametrize("storage", ["status", "annotations"])
async def test_a_custom_progress_storage_is_the_operators_write(
        storage: str, installed: Any, logger: logging.Logger) -> None:
    settings = kopf.OperatorSettings()
    settings.persistence.progress_storage = (
        kopf.StatusProgressStorage(field="status.my-op.progress") if storage == "status"
        else kopf.AnnotationsProgressStorage(prefix="my-op.example.com"))
    fn = writing(["a"])
    h = handler(fn.fn)
    cause = changing_cause(BODY, logger)
    outcomes = await run_handlers([h], cause, settings=settings)
    next_body = body_after(cause)
    if storage == "status":  # what Kopf's own storage stores with the outcome
        next_body["status"]["my-op"] = {"progress": {"h": {"retries": 1, "message": "stored by Kopf"}}}
    else:
        next_body["metadata"]["annotations"]["my-op.example.com/h"] = '{"retries": 1}'
    again = changing_cause(next_body, logger)
    assert await run_handlers([h], again, parked_state([h], outcomes), settings=settings) == {}
    assert fn.calls == 1


async def test_records_of_handlers_the_operator_no_longer_has_go_with_the_next_memory_write(
        installed: Any, logger: logging.Logger) -> None:
    from kopf_outcomes.memory import MEMORY_ANNOTATION
    from tests.unit.test_patched_execution import records_in

    registry = kopf.OperatorRegistry()

    async def fn(**_: Any) -> Outcome:
        return Pending("waiting")

    kopf.on.create("kopf.dev", "v1", "kopfexamples", registry=registry, id="h")(fn)
    kopf.on.field("kopf.dev", "v1", "kopfexamples", field="spec.x", registry=registry, id="f")(fn)
    stale = {"digest": "d", "outcome": "pending", "reason": "old", "since": "2026-01-01T00:00:00+00:00"}
    body = {**BODY, "metadata": {**BODY["metadata"], "annotations": {MEMORY_ANNOTATION: json.dumps(
        {"renamed_fn": stale, "h/child": stale, "f/spec.x": stale})}}}
    token = operator_registry.set(registry)
    try:
        cause = changing_cause(body, logger)
        await run_handlers([handler(fn)], cause)
    finally:
        operator_registry.reset(token)
    assert set(records_in(cause.patch)) == {"h", "h/child", "f/spec.x"}  # renamed_fn is gone
