"""
Edges of the engine found by an adversarial review, each replayed through Kopf's own cycle:
sub-handlers that recheck or retain under a parent with ``retries=``, a sibling of Kopf's own,
the operator's writes in another handler's cycle, a recheck's own write, a repeated event.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import Fatal, HandlerRun, Outcome, Pending, hookimpl
from kopf_outcomes._kopf import requeue
from kopf_outcomes._kopf.internals import changes_only
from kopf_outcomes._kopf.marks import PARKED_DELAY
from kopf_outcomes.memory import RELEASE_ANNOTATION
from tests.unit.kopf_objects import (
    RESOURCE,
    Reason,
    body_after,
    changing_cause,
    handler,
    parked_state,
    run_handlers,
    state_for,
)
from tests.unit.releases import stamped
from tests.unit.test_patched_execution import BODY
from tests.unit.test_subhandlers import Family


@pytest.fixture
def installed(unpatched: None) -> Any:
    return kopf_outcomes.install(entry_points=False)


def deleting(cause: Any, logger: logging.Logger, **changes: Any) -> Any:
    """The next event of a deleting object: the body as patched, with ``changes``."""
    return changing_cause(body_after(cause, **changes), logger, reason=Reason.DELETE)


async def test_a_retained_sub_handler_is_not_released_by_its_parents_retries(
        installed: Any, logger: logging.Logger) -> None:
    family = Family(Fatal("the external system refused; a person must look", on_delete="retain"))
    parent = handler(family.handler.fn, id="parent", retries=2)
    cause = changing_cause(BODY, logger, reason=Reason.DELETE)
    outcomes = await run_handlers([parent], cause)
    state = parked_state([parent], outcomes)
    for size in range(3):  # somebody edits the object three times: each wakes the parent
        cause = deleting(cause, logger, spec={"size": 10 + size})
        outcomes = await run_handlers([parent], cause, state)
        if "parent" in outcomes:
            assert outcomes["parent"].final is False, "the parent's retries= released the retained child"
            state = state.with_outcomes(outcomes)
    released = body_after(cause)
    released["metadata"]["annotations"][RELEASE_ANNOTATION] = stamped(released["metadata"]["annotations"],
                                                                 "parent/child")  # as the log line says
    outcomes = await run_handlers([parent], changing_cause(released, logger, reason=Reason.DELETE), state)
    assert outcomes["parent"].final is True  # released by the person, and only then


async def test_a_rechecking_sub_handler_keeps_rechecking(installed: Any, logger: logging.Logger) -> None:
    family = Family(Pending("polling the outside", recheck=1))
    cause = changing_cause(BODY, logger, reason=Reason.DELETE)
    outcomes = await run_handlers([family.handler], cause)
    state = parked_state([family.handler], outcomes)
    await asyncio.sleep(1.2)  # the recheck is due; nothing changed outside
    outcomes = await run_handlers([family.handler], deleting(cause, logger), state)
    assert family.child_calls == 2
    parent = outcomes.get("parent")
    assert parent is None or parent.delay != PARKED_DELAY, "the parent parked: the child never rechecks again"


async def test_a_rechecking_sub_handler_beside_one_of_kopfs_does_not_loop_its_parent(
        installed: Any, logger: logging.Logger) -> None:
    calls = {"parent": 0}

    async def polling(**_: Any) -> Outcome:
        return Pending("polling the outside", recheck=2)

    async def flaky(**_: Any) -> None:
        raise kopf.TemporaryError("flaky", delay=30)

    async def parent_fn(**_: Any) -> None:
        calls["parent"] += 1
        await kopf.execute(fns={"polling": polling, "flaky": flaky})

    h = handler(parent_fn, id="parent", retries=10)
    cause = changing_cause(BODY, logger, reason=Reason.DELETE)
    state = state_for([h]).with_outcomes(await run_handlers([h], cause))
    await asyncio.sleep(2.1)  # the parent's retry and the recheck are due
    for _ in range(12):  # each cycle is the event of the previous cycle's PATCH
        cause = deleting(cause, logger)
        if not state["parent"].awakened:
            break
        outcomes = await run_handlers([h], cause, state)
        if "parent" not in outcomes:
            break
        assert not outcomes["parent"].final, outcomes["parent"].exception
        state = state.with_outcomes(outcomes)
    assert calls["parent"] <= 3, f"the parent is re-run without a pause: {calls}"


async def test_a_sub_handlers_digest_is_of_its_own_state(installed: Any, logger: logging.Logger) -> None:
    """A sibling's result at status["parent/a"] is the operator's write for b, in every cycle."""
    seen: list[bool] = []

    async def a(**_: Any) -> object:
        return {"ticket": 42}

    async def b(**_: Any) -> Outcome:
        seen.append(kopf_outcomes.recall().acted_on_this_state)
        return Pending("waiting for the callback")

    async def parent_fn(**_: Any) -> None:
        await kopf.execute(fns={"a": a, "b": b})

    h = handler(parent_fn, id="parent")
    cause = changing_cause(BODY, logger, reason=Reason.DELETE)
    await run_handlers([h], cause)
    await run_handlers([h], deleting(cause, logger), state_for([h]))  # the parent runs again
    assert seen == [False], f"b ran again on an unchanged state: {seen}"


class Audit:
    """An observer that writes a changing field and does not name it."""

    runs = 0

    @hookimpl
    def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome, patch: Any) -> None:
        Audit.runs += 1
        patch.setdefault("status", {})["audit"] = {"observed": Audit.runs}


async def test_an_observers_write_for_one_handler_does_not_wake_another_parked_one(
        unpatched: None, logger: logging.Logger) -> None:
    kopf_outcomes.install(entry_points=False, plugins=[Audit()])
    calls = {"x": 0, "y": 0}

    async def x(**_: Any) -> None:
        calls["x"] += 1
        raise kopf.TemporaryError("flaky", delay=1)

    async def y(**_: Any) -> Outcome:
        calls["y"] += 1
        return Pending("waiting for the callback")

    hx, hy = handler(x, id="x"), handler(y, id="y")
    cause = changing_cause(BODY, logger, reason=Reason.DELETE)
    state = state_for([hx, hy]).with_outcomes(await run_handlers([hx, hy], cause))
    for _ in range(2):  # Kopf retries x (its delay is over); nobody else touches the object
        cause = deleting(cause, logger)
        kept = {"basetime": state.basetime} if hasattr(state, "basetime") else {}  # Kopf >= 1.38
        awakened = type(state)({**{key: state[key] for key in state}, "x": state_for([hx])["x"]}, **kept)
        state = awakened.with_outcomes(await run_handlers([hx, hy], cause, awakened))
    assert calls == {"x": 3, "y": 1}


async def test_a_rechecks_own_write_does_not_run_it_again(installed: Any, logger: logging.Logger) -> None:
    calls = 0

    async def fn(patch: kopf.Patch, **_: Any) -> Outcome:
        nonlocal calls
        calls += 1
        patch.status["lastCheck"] = datetime.datetime.now(datetime.timezone.utc).isoformat()
        return Pending("waiting for the outside", recheck=1)

    requeue._runs.set({})  # as the object's worker sets it
    h = handler(fn, id="h")
    cause = changing_cause(BODY, logger, reason=Reason.DELETE)
    state = state_for([h]).with_outcomes(await run_handlers([h], cause))
    await asyncio.sleep(1.05)  # the first grid point
    for _ in range(5):  # the requeue, then each PATCH's own event, ~10 ms apart
        cause = deleting(cause, logger)
        state = state.with_outcomes(await run_handlers([h], cause, state))
        await asyncio.sleep(0.01)
    assert calls == 2, f"{calls} runs for one grid point"


def test_a_requeued_event_keeps_the_event_handlers_fields_in_kopfs_diff_base() -> None:
    """Silenced, not removed: Kopf reads their extra fields into the diff-base essence (else a
    repeated event would read as an update that removed them), and runs none of them."""
    registry = kopf.OperatorRegistry()
    kopf.on.event(*("kopf.dev", "v1", "kopfexamples"), field="status.phase", registry=registry)(lambda **_: None)
    silenced = changes_only(registry)
    assert silenced._watching.get_extra_fields(resource=RESOURCE) == registry._watching.get_extra_fields(
        resource=RESOURCE) != set()
    assert not silenced._watching.has_handlers(resource=RESOURCE)
    assert registry._watching.has_handlers(resource=RESOURCE)
