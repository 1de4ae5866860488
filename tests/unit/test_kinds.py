"""
The kind x outcome table, cell by cell, through Kopf's own ``execute_handlers_once`` with the
cause and the handler that Kopf builds for each kind; then each kind's own engine where the
meaning shows only there (a timer's next delay, an activity's start, a webhook's answer).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, MutableMapping
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import Fatal, HandlerRun, Outcome, Pending, Retry, Success, hookimpl
from kopf_outcomes._kopf.marks import PARKED_DELAY, Parked, Polling, Rechecking
from kopf_outcomes.manager import PluginManager
from tests.unit.conftest import Collector
from tests.unit.kopf_objects import (  # noqa: I001
    activities,
    admission,
    cause_of,
    causes,
    configuration,
    ephemera,
    execution,
    handler_of,
    lifecycles,
    progression,
    run_handlers,
)
from tests.unit.test_patched_execution import BODY, records_in

KINDS = ["change", "timer", "daemon", "activity", "webhook", "event", "index"]
OUTCOMES = {
    "success": Success("value"),
    "pending": Pending("waiting"),
    "recheck": Pending("waiting", recheck=5),
    "retry": Retry("later", delay=3),
    "fatal": Fatal("broken"),
}
# What Kopf gets: final, delay, the exception's type. Stated here again, not read from kinds.py.
REFUSED = (True, None, kopf.PermanentError)
REJECTED = (True, None, kopf.PermanentError)
RETRIED = (False, 3, kopf.TemporaryError)
FAILED = (True, None, kopf.PermanentError)
POLLED = (False, 5, Polling)
EXPECTED: dict[str, dict[str, tuple[bool, float | None, type[BaseException] | None]]] = {
    "change": {"pending": (False, PARKED_DELAY, Parked), "recheck": (False, 5, Rechecking),
               "retry": RETRIED, "fatal": FAILED},
    "timer": {"pending": (True, None, None), "recheck": POLLED, "retry": RETRIED, "fatal": FAILED},
    "daemon": {"pending": REFUSED, "recheck": POLLED, "retry": RETRIED, "fatal": FAILED},
    "activity": {"pending": REFUSED, "recheck": POLLED, "retry": RETRIED, "fatal": FAILED},
    "webhook": {"pending": REJECTED, "recheck": REJECTED, "retry": REJECTED, "fatal": REJECTED},
    "event": {"pending": REFUSED, "recheck": REFUSED, "retry": REFUSED, "fatal": REFUSED},
    "index": {"pending": REFUSED, "recheck": REFUSED, "retry": REFUSED, "fatal": REFUSED},
}


@pytest.fixture
def installed(unpatched: None) -> Iterator[PluginManager]:
    yield kopf_outcomes.install(entry_points=False)


async def run_once(kind: str, outcome: Outcome, logger: logging.Logger) -> tuple[Any, Any]:
    async def fn(**_: Any) -> Outcome:
        return outcome

    handler = handler_of(kind, fn)
    cause = cause_of(kind, BODY, logger)
    outcomes = await run_handlers([handler], cause)
    return outcomes[str(handler.id)], cause


@pytest.mark.parametrize("name", OUTCOMES)
@pytest.mark.parametrize("kind", KINDS)
async def test_each_cell_of_the_table(kind: str, name: str, installed: Any, logger: logging.Logger,
                                      collector: Collector) -> None:
    outcome, cause = await run_once(kind, OUTCOMES[name], logger)
    if name == "success":
        assert (outcome.final, outcome.exception, outcome.result) == (True, None, "value")
        return
    final, delay, exception_type = EXPECTED[kind][name]
    assert (outcome.final, outcome.delay) == (final, delay)
    assert type(outcome.exception) is exception_type if exception_type is not None else outcome.exception is None
    levels = {level for level, _ in collector.pairs()}
    if name in ("pending", "recheck") and kind not in ("webhook", "event", "index", "daemon", "activity"):
        assert logging.ERROR not in levels and logging.WARNING not in levels  # quiet
    if (kind, name) in (("daemon", "pending"), ("activity", "pending")) or kind in ("event", "index"):
        assert f"kind {kind!r}" in str(outcome.exception)  # the misuse names the kind
        assert logging.ERROR in levels
    if kind == "webhook":
        assert str(outcome.exception) == OUTCOMES[name].reason  # the reason alone: no marks of ours
    if kind != "change" and getattr(cause, "patch", None) is not None:
        assert records_in(cause.patch) == "absent"  # no memory where Kopf keeps no progress


async def test_a_rechecking_timer_sleeps_its_recheck_on_every_tick(installed: Any, logger: logging.Logger) -> None:
    """Kopf's timer sleeps ``state.delays`` after a run that did not finish: always the recheck,
    also when the conclusion is the same as before (a stale 0 was a busy loop)."""
    calls = 0

    async def fn(**_: Any) -> Outcome:
        nonlocal calls
        calls += 1
        return Pending("waiting", recheck=1)

    handler = handler_of("timer", fn)
    cause = cause_of("timer", BODY, logger)
    state = progression.State.from_scratch().with_handlers([handler])
    for _ in range(2):
        outcomes = await execution.execute_handlers_once(
            lifecycle=lifecycles.all_at_once, settings=configuration.OperatorSettings(),
            handlers=[handler], cause=cause, state=state)
        state = state.with_outcomes(outcomes)
        assert not state.done
        [delay] = state.delays
        assert 0.5 < delay <= 1
        await asyncio.sleep(delay)  # as Kopf's timer does
    assert calls == 2


async def test_a_plain_pending_in_a_startup_activity_stops_the_start_with_an_error_naming_it(
        installed: Any) -> None:
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    async def wait_for_ever(**_: Any) -> Outcome:
        return Pending("nothing will change")

    with pytest.raises(activities.ActivityError) as raised:
        await asyncio.wait_for(activities.run_activity(
            lifecycle=lifecycles.all_at_once, registry=registry, settings=configuration.OperatorSettings(),
            activity=causes.Activity.STARTUP, indices={}, memo=ephemera.Memo()), timeout=10)
    assert "kind 'activity'" in str(raised.value.__cause__)


async def test_a_rechecking_startup_activity_polls_until_it_succeeds(installed: Any) -> None:
    registry = kopf.OperatorRegistry()
    answers = [Pending("not yet", recheck=1), Success("ready")]

    @kopf.on.startup(registry=registry)
    async def poll(**_: Any) -> Outcome:
        return answers.pop(0)

    results = await asyncio.wait_for(activities.run_activity(
        lifecycle=lifecycles.all_at_once, registry=registry, settings=configuration.OperatorSettings(),
        activity=causes.Activity.STARTUP, indices={}, memo=ephemera.Memo()), timeout=10)
    assert list(results.values()) == ["ready"] and answers == []


async def test_a_webhooks_answer_carries_the_reason_and_no_writes_of_ours_or_observers(
        installed: PluginManager, logger: logging.Logger) -> None:
    class Writer:
        @hookimpl
        def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome,
                                          patch: MutableMapping[str, Any]) -> None:
            patch.setdefault("status", {})["seen"] = run.kind

    installed.register(Writer(), name="writer")
    outcome, cause = await run_once("webhook", Pending("the bucket is not ready yet"), logger)
    request: Any = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u"}}
    response = admission.build_response(request=request, outcomes={"h": outcome}, warnings=[],
                                        jsonpatch=cause.patch.as_json_patch())
    assert response["response"]["allowed"] is False
    assert response["response"]["status"]["message"] == "the bucket is not ready yet"
    assert "patch" not in response["response"]  # a validating webhook may not patch at all


async def test_hooks_see_the_kind_of_the_run(installed: PluginManager, logger: logging.Logger) -> None:
    seen: list[str] = []

    class Kinds:
        @hookimpl
        def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome,
                                          patch: MutableMapping[str, Any]) -> None:
            seen.append(run.kind)

    installed.register(Kinds(), name="kinds")
    for kind in KINDS:
        await run_once(kind, Success(), logger)
    assert seen == [kind for kind in KINDS if kind not in ("event", "index")]  # stock Kopf's: no hooks
    assert kopf_outcomes.Kind("sub-handler") is kopf_outcomes.Kind.SUBHANDLER
