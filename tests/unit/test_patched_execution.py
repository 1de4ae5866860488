"""
The patched Kopf functions, in process, with real Kopf objects (causes, handlers, states).

Each test calls Kopf's ``execute_handlers_once`` as Kopf's reactor does, once per simulated
event; the next event's body is the previous one with its patch applied.
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import (
    Decision,
    Fatal,
    HandlerRun,
    Outcome,
    Pending,
    Retry,
    Success,
    handler_options,
    hookimpl,
)
from kopf_outcomes._kopf.marks import PARKED_DELAY, PARKED_MARK, RETAINED_MARK
from kopf_outcomes.manager import PluginManager as Plugins
from kopf_outcomes.memory import MEMORY_ANNOTATION, RELEASE_ANNOTATION
from tests.unit.conftest import Collector, digest
from tests.unit.kopf_objects import (
    Reason,
    application,
    body_after,
    changing_cause,
    handler,
    parked_state,
    run_handler,
    run_handlers,
)
from tests.unit.releases import stamped

BODY: dict[str, Any] = {
    "apiVersion": "kopf.dev/v1",
    "kind": "KopfExample",
    "metadata": {
        "name": "example",
        "namespace": "default",
        "uid": "uid-1",
        "deletionTimestamp": "2024-01-01T00:00:00Z",
        "finalizers": ["kopf.zalando.org/KopfFinalizerMarker"],
        "annotations": {"example.com/owner": "team-a"},
    },
    "spec": {"size": 1},
    "status": {"deletion": "requested"},
}

Fn = Callable[..., Any]


@pytest.fixture
def installed(unpatched: None) -> Iterator[Plugins]:
    yield kopf_outcomes.install(entry_points=False)


class Counted:
    """An async handler function (``.fn``) that counts its calls and does what it is told."""

    def __init__(self, action: Callable[[], Any]) -> None:
        self.calls = 0

        async def fn(**_: Any) -> Any:
            self.calls += 1
            return action()

        self.fn = fn


def returning(value: Any) -> Counted:
    return Counted(lambda: value)


def raising(error: BaseException) -> Counted:
    def action() -> None:
        raise error

    return Counted(action)


def records_in(patch_: MutableMapping[str, Any]) -> Any:
    """The memory in a pending patch: the parsed records, None for a removal, or absent."""
    annotations = patch_.get("metadata", {}).get("annotations", {})
    if MEMORY_ANNOTATION not in annotations:
        return "absent"
    raw = annotations[MEMORY_ANNOTATION]
    return None if raw is None else json.loads(raw)


def above_debug(collector: Collector) -> list[tuple[int, str]]:
    return [(level, msg) for level, msg in collector.pairs() if level > logging.DEBUG]


# --- Pending -----------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["returned", "raised"])
async def test_pending_parks_the_handler_and_remembers_the_state(
    form: str, installed: Any, logger: logging.Logger, collector: Collector
) -> None:
    pending = Pending("waiting for the callback")
    fn = returning(pending) if form == "returned" else raising(pending)
    h = handler(fn.fn)
    cause = changing_cause(BODY, logger)

    outcomes = await run_handlers([h], cause)

    outcome = outcomes["h"]
    assert outcome.final is False
    assert outcome.delay == PARKED_DELAY
    assert str(outcome.exception) == f"waiting for the callback{PARKED_MARK}"  # marked as parked by us
    record = records_in(cause.patch)["h"]
    assert set(records_in(cause.patch)) == {"h"}
    assert {key: record[key] for key in ("digest", "outcome", "reason", "parked")} == {
        "digest": digest(cause.body, excluded=[("status", "h")]),
        "outcome": "pending",
        "reason": "waiting for the callback",
        "parked": True,
    }
    assert datetime.datetime.fromisoformat(record["since"]).tzinfo is not None
    assert above_debug(collector) == [
        (logging.INFO, "Handler 'h' is pending: waiting for the callback"),
    ]


async def test_pending_again_on_the_same_state_is_logged_at_debug_and_writes_nothing(
    installed: Any, logger: logging.Logger, collector: Collector
) -> None:
    h = handler(returning(Pending("waiting for the callback")).fn)
    first = changing_cause(BODY, logger)
    await run_handlers([h], first)
    collector.records.clear()

    second = changing_cause(body_after(first), logger)  # e.g. a recheck: a fresh, awakened state
    outcomes = await run_handlers([h], second)

    assert outcomes["h"].delay == PARKED_DELAY
    assert above_debug(collector) == []
    assert (logging.DEBUG, "Handler 'h' is pending: waiting for the callback") in collector.pairs()
    assert records_in(second.patch) == "absent"


async def test_pending_with_another_reason_is_logged_at_info_again(
    installed: Any, logger: logging.Logger, collector: Collector
) -> None:
    first = changing_cause(BODY, logger)
    await run_handlers([handler(returning(Pending("step 1")).fn)], first)
    collector.records.clear()

    second = changing_cause(body_after(first), logger)
    await run_handlers([handler(returning(Pending("step 2")).fn)], second)

    assert above_debug(collector) == [(logging.INFO, "Handler 'h' is pending: step 2")]
    assert records_in(second.patch)["h"]["reason"] == "step 2"


async def test_pending_with_recheck_is_delayed_by_it(
    installed: Any, logger: logging.Logger
) -> None:
    cause = changing_cause(BODY, logger)
    outcomes = await run_handlers([handler(returning(Pending("x", recheck=5)).fn)], cause)
    assert outcomes["h"].final is False
    assert outcomes["h"].delay == 5.0
    assert records_in(cause.patch)["h"]["outcome"] == "pending"


# --- Retry ---------------------------------------------------------------------------------------


async def test_retry_is_logged_at_its_level_and_retried_after_its_delay(
    installed: Any, logger: logging.Logger, collector: Collector
) -> None:
    cause = changing_cause(BODY, logger)
    outcomes = await run_handlers([handler(raising(Retry("flaky", level="WARNING", delay=3)).fn)], cause)

    outcome = outcomes["h"]
    assert outcome.final is False
    assert outcome.delay == 3.0
    assert isinstance(outcome.exception, kopf.TemporaryError)
    assert outcome.exception.delay == 3.0
    assert str(outcome.exception) == "flaky"
    assert above_debug(collector) == [(logging.WARNING, "Handler 'h' failed temporarily: flaky")]
    assert records_in(cause.patch) == "absent"  # a Retry is not remembered by default


async def test_retry_counts_against_the_handlers_retries(
    installed: Any, logger: logging.Logger, collector: Collector
) -> None:
    cause = changing_cause(BODY, logger)
    h = handler(returning(Retry("flaky", level="INFO", delay=3)).fn, retries=1)
    outcomes = await run_handlers([h], cause)

    outcome = outcomes["h"]
    assert outcome.final is True
    assert isinstance(outcome.exception, kopf.HandlerRetriesError)
    message = "Handler 'h' failed temporarily but will exceed 1 retries: flaky"
    assert str(outcome.exception) == message
    assert above_debug(collector) == [(logging.ERROR, message)]


async def test_retry_counts_against_the_handlers_timeout(
    installed: Any, logger: logging.Logger, collector: Collector
) -> None:
    cause = changing_cause(BODY, logger)
    h = handler(returning(Retry("slow", delay=30)).fn, timeout=10)
    outcomes = await run_handlers([h], cause)

    assert outcomes["h"].final is True
    assert isinstance(outcomes["h"].exception, kopf.HandlerTimeoutError)
    message = "Handler 'h' failed temporarily but will time out after 10 seconds: slow"
    assert above_debug(collector) == [(logging.ERROR, message)]


async def test_retry_is_remembered_with_the_remember_option(
    installed: Any, logger: logging.Logger
) -> None:
    fn = returning(Retry("flaky", delay=1))
    handler_options(remember=True)(fn.fn)
    cause = changing_cause(BODY, logger)
    await run_handlers([handler(fn.fn)], cause)
    assert records_in(cause.patch)["h"]["outcome"] == "retry"
    assert records_in(cause.patch)["h"]["reason"] == "flaky"


# --- Fatal ---------------------------------------------------------------------------------------


async def test_fatal_retained_on_delete_keeps_the_finalizer_until_released(
    installed: Any, logger: logging.Logger, collector: Collector
) -> None:
    cause = changing_cause(BODY, logger, reason=Reason.DELETE)
    outcomes = await run_handlers([handler(raising(Fatal("broken", on_delete="retain")).fn)], cause)

    outcome = outcomes["h"]
    assert outcome.final is False
    assert outcome.delay == PARKED_DELAY
    assert str(outcome.exception) == f"broken{RETAINED_MARK}"  # marked as parked by us
    assert records_in(cause.patch)["h"]["outcome"] == "retained"
    assert records_in(cause.patch)["h"]["reason"] == "broken"
    [(level, message)] = above_debug(collector)
    assert level == logging.ERROR
    assert message.startswith("Handler 'h' failed permanently: broken. The finalizer is retained")
    assert f"{RELEASE_ANNOTATION}=h@" in message  # with the stamp of this retention


async def test_fatal_is_retained_by_the_handlers_option(
    installed: Any, logger: logging.Logger
) -> None:
    fn = returning(Fatal("broken"))
    handler_options(fatal_on_delete="retain")(fn.fn)
    cause = changing_cause(BODY, logger, reason=Reason.DELETE)
    outcomes = await run_handlers([handler(fn.fn)], cause)
    assert outcomes["h"].final is False
    assert outcomes["h"].delay == PARKED_DELAY
    assert records_in(cause.patch)["h"]["outcome"] == "retained"


async def test_the_outcomes_own_release_wins_over_the_handlers_option(
    installed: Any, logger: logging.Logger
) -> None:
    fn = returning(Fatal("broken", on_delete="release"))
    handler_options(fatal_on_delete="retain")(fn.fn)
    cause = changing_cause(BODY, logger, reason=Reason.DELETE)
    outcomes = await run_handlers([handler(fn.fn)], cause)
    assert outcomes["h"].final is True


async def test_kopfs_permanent_error_is_retained_by_the_option_with_a_plugin_present(
    unpatched: None, logger: logging.Logger
) -> None:
    class Bystander:
        @hookimpl
        def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None: ...

    kopf_outcomes.install(entry_points=False, plugins=[Bystander()])
    fn = raising(kopf.PermanentError("broken"))
    handler_options(fatal_on_delete="retain")(fn.fn)
    cause = changing_cause(BODY, logger, reason=Reason.DELETE)
    outcomes = await run_handlers([handler(fn.fn)], cause)
    assert outcomes["h"].final is False
    assert outcomes["h"].delay == PARKED_DELAY
    assert str(outcomes["h"].exception) == f"broken{RETAINED_MARK}"
    assert records_in(cause.patch)["h"]["outcome"] == "retained"


@pytest.mark.parametrize(
    ("fatal", "reason"),
    [
        (Fatal("broken"), Reason.DELETE),
        (Fatal("broken", on_delete="release"), Reason.DELETE),
        (Fatal("broken", on_delete="retain"), Reason.UPDATE),  # retain is about deletion only
    ],
)
async def test_fatal_otherwise_is_final(
    fatal: Fatal, reason: Any, installed: Any, logger: logging.Logger, collector: Collector
) -> None:
    cause = changing_cause(BODY, logger, reason=reason)
    outcomes = await run_handlers([handler(raising(fatal).fn)], cause)

    outcome = outcomes["h"]
    assert outcome.final is True
    assert type(outcome.exception) is kopf.PermanentError
    assert str(outcome.exception) == "broken"
    assert above_debug(collector) == [(logging.ERROR, "Handler 'h' failed permanently: broken")]
    assert records_in(cause.patch) == "absent"


async def test_fatal_at_a_chosen_level(installed: Any, logger: logging.Logger, collector: Collector) -> None:
    cause = changing_cause(BODY, logger, reason=Reason.UPDATE)
    await run_handlers([handler(returning(Fatal("broken", level="WARNING")).fn)], cause)
    assert above_debug(collector) == [(logging.WARNING, "Handler 'h' failed permanently: broken")]


async def test_success_returned_is_final_with_its_result(
    installed: Any, logger: logging.Logger, collector: Collector
) -> None:
    cause = changing_cause(BODY, logger)
    outcomes = await run_handlers([handler(returning(Success({"done": 1})).fn)], cause)
    assert outcomes["h"].final is True
    assert outcomes["h"].exception is None
    assert outcomes["h"].result == {"done": 1}
    assert above_debug(collector) == [(logging.INFO, "Handler 'h' succeeded.")]


async def test_an_outcome_of_a_users_own_making_is_retried_at_error(
    installed: Any, logger: logging.Logger, collector: Collector
) -> None:
    class Maybe(Outcome):
        def _fields(self) -> tuple[Any, ...]:
            return ()

    cause = changing_cause(BODY, logger)
    outcomes = await run_handlers([handler(returning(Maybe()).fn, backoff=4.0)], cause)
    assert outcomes["h"].final is False
    assert outcomes["h"].delay == 4.0
    assert above_debug(collector) == [(
        logging.ERROR,
        "Handler 'h' failed temporarily: unknown outcome type Maybe; "
        "expected Success, Pending, Retry or Fatal",
    )]


# --- waking parked handlers ------------------------------------------------------------------------


async def park(fn: Counted, logger: logging.Logger, **cause_kwargs: Any) -> tuple[Any, Any, Any]:
    """The first event: the handler runs and parks. Returns its handler, cause and next state."""
    h = handler(fn.fn)
    cause = changing_cause(BODY, logger, **cause_kwargs)
    outcomes = await run_handlers([h], cause)
    assert outcomes["h"].delay == PARKED_DELAY
    assert fn.calls == 1
    return h, cause, parked_state([h], outcomes)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"status": {"deletion": "requested", "kopf": {"progress": {"h": {"retries": 1}}}}},
        {"status": {"deletion": "requested", "h": {"result": "stored by Kopf"}}},
    ],
    ids=["nothing", "kopf-progress", "handler-result"],
)
async def test_a_parked_handler_is_not_rerun_while_its_state_is_unchanged(
    changes: dict[str, Any], installed: Any, logger: logging.Logger, collector: Collector
) -> None:
    fn = returning(Pending("waiting"))
    h, cause, state = await park(fn, logger)
    collector.records.clear()

    body = body_after(cause, **changes)
    body["metadata"]["annotations"]["kopf.zalando.org/touch-dummy"] = "now"
    nxt = changing_cause(body, logger)
    outcomes = await run_handlers([h], nxt, state)

    assert outcomes == {}
    assert fn.calls == 1
    assert dict(nxt.patch) == {}
    assert above_debug(collector) == []


@pytest.mark.parametrize(
    "changes",
    [
        {"spec": {"size": 2}},
        {"status": {"deletion": "done"}},
    ],
    ids=["spec", "status"],
)
async def test_a_parked_handler_is_rerun_when_its_state_changed(
    changes: dict[str, Any], installed: Any, logger: logging.Logger
) -> None:
    fn = returning(Pending("waiting"))
    h, cause, state = await park(fn, logger)
    assert not state["h"].awakened  # Kopf alone would skip it for ten years

    nxt = changing_cause(body_after(cause, **changes), logger)
    outcomes = await run_handlers([h], nxt, state)

    assert fn.calls == 2
    assert set(outcomes) == {"h"}
    new_digest = digest(nxt.body, excluded=[("status", "h")])
    assert records_in(nxt.patch)["h"]["digest"] == new_digest


async def test_a_parked_handler_with_depends_on_wakes_only_for_those_fields(
    installed: Any, logger: logging.Logger
) -> None:
    fn = returning(Pending("waiting"))
    handler_options(depends_on=["status.deletion"])(fn.fn)
    h, cause, state = await park(fn, logger)

    unrelated = changing_cause(body_after(cause, spec={"size": 5}), logger)
    assert await run_handlers([h], unrelated, state) == {}
    assert fn.calls == 1

    related = changing_cause(body_after(cause, status={"deletion": "done"}), logger)
    await run_handlers([h], related, state)
    assert fn.calls == 2


async def test_a_parked_handler_without_memory_is_rerun(
    installed: Any, logger: logging.Logger
) -> None:
    fn = returning(Pending("waiting"))
    h, cause, state = await park(fn, logger)

    lost = body_after(cause)
    del lost["metadata"]["annotations"][MEMORY_ANNOTATION]
    nxt = changing_cause(lost, logger)
    await run_handlers([h], nxt, state)

    assert fn.calls == 2
    assert records_in(nxt.patch)["h"]["outcome"] == "pending"


async def test_a_retained_handler_waits_for_the_release_annotation_only(
    installed: Any, logger: logging.Logger, collector: Collector
) -> None:
    fn = returning(Fatal("broken", on_delete="retain"))
    h, cause, state = await park(fn, logger, reason=Reason.DELETE)

    changed = changing_cause(body_after(cause, spec={"size": 99}), logger)
    assert await run_handlers([h], changed, state) == {}
    assert fn.calls == 1

    released_body = body_after(cause)
    annotations = released_body["metadata"]["annotations"]
    annotations[RELEASE_ANNOTATION] = f"other, {stamped(annotations, 'h')}"
    released = changing_cause(released_body, logger)
    collector.records.clear()
    outcomes = await run_handlers([h], released, state)

    assert fn.calls == 1  # released without running the handler again
    assert outcomes["h"].final is True
    assert type(outcomes["h"].exception) is kopf.PermanentError
    assert str(outcomes["h"].exception) == "broken"
    assert records_in(released.patch) is None  # the last record went
    [(level, message)] = above_debug(collector)
    assert level == logging.WARNING
    assert message.startswith(f"Handler 'h' is released by the annotation {RELEASE_ANNOTATION!r}")


async def test_a_release_annotation_for_another_handler_releases_nothing(
    installed: Any, logger: logging.Logger
) -> None:
    fn = returning(Fatal("broken", on_delete="retain"))
    h, cause, state = await park(fn, logger, reason=Reason.DELETE)
    body = body_after(cause)
    body["metadata"]["annotations"][RELEASE_ANNOTATION] = "other"
    assert await run_handlers([h], changing_cause(body, logger), state) == {}


# --- recall ----------------------------------------------------------------------------------------


async def test_recall_tells_whether_the_handler_acted_on_this_state(
    installed: Any, logger: logging.Logger
) -> None:
    seen: list[kopf_outcomes.Memory] = []

    def action() -> Pending:
        seen.append(kopf_outcomes.recall())
        return Pending("waiting")

    h = handler(Counted(action).fn)
    first = changing_cause(BODY, logger)
    await run_handlers([h], first)
    again = changing_cause(body_after(first), logger)
    await run_handlers([h], again)
    moved = changing_cause(body_after(first, spec={"size": 2}), logger)
    await run_handlers([h], moved)

    assert [r.acted_on_this_state for r in seen] == [False, True, False]
    assert seen[0].previous is None
    previous = seen[1].previous
    assert previous is not None
    assert (previous["digest"], previous["outcome"], previous["reason"]) == (seen[0].digest, "pending", "waiting")
    assert seen[1].idempotency_key == seen[0].idempotency_key  # the same object, handler and state
    assert seen[2].idempotency_key != seen[0].idempotency_key
    assert seen[1].digest == seen[0].digest
    assert seen[2].digest != seen[0].digest


async def test_recall_works_in_sync_handlers_too(installed: Any, logger: logging.Logger) -> None:
    seen: list[bool] = []

    def fn(**_: Any) -> Pending:  # Kopf runs it in a thread of its executor
        seen.append(kopf_outcomes.recall().acted_on_this_state)
        return Pending("waiting")

    first = changing_cause(BODY, logger)
    outcomes = await run_handlers([handler(fn)], first)
    assert outcomes["h"].delay == PARKED_DELAY
    await run_handlers([handler(fn)], changing_cause(body_after(first), logger))
    assert seen == [False, True]


async def test_a_pending_handler_that_then_succeeds_forgets_its_memory(
    installed: Any, logger: logging.Logger, collector: Collector
) -> None:
    answers: list[Any] = [Pending("waiting"), {"x": 1}]
    fn = Counted(lambda: answers.pop(0))
    h = handler(fn.fn)
    first = changing_cause(BODY, logger)
    state = parked_state([h], await run_handlers([h], first))

    moved = changing_cause(body_after(first, status={"deletion": "done"}), logger)
    collector.records.clear()
    outcomes = await run_handlers([h], moved, state)

    assert outcomes["h"].final is True
    assert outcomes["h"].result == {"x": 1}
    assert records_in(moved.patch) is None  # its record was the last one
    assert above_debug(collector) == [(logging.INFO, "Handler 'h' succeeded.")]


def test_recall_outside_a_handler_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match=r"recall\(\) works only inside a handler"):
        kopf_outcomes.recall()


# --- apply ---------------------------------------------------------------------------------------


async def cycle_of(*fns: Counted, logger: logging.Logger) -> tuple[Any, list[float]]:
    """One cycle of these handlers (ids h0, h1, ...): its cause, and the delays Kopf's
    processing then hands to apply(): its daemons' first (here one of 7 s), then the handlers'."""
    handlers = [handler(fn.fn, id=f"h{index}") for index, fn in enumerate(fns)]
    cause = changing_cause(BODY, logger)
    state = parked_state(handlers, {})
    outcomes = await run_handlers(handlers, cause, state)
    return cause, [7.0, *state.with_outcomes(outcomes).delays]


@pytest.mark.parametrize(("fns", "passed"), [
    ([returning(Pending("waiting")), raising(kopf.TemporaryError("later", delay=5))], [7.0, 5.0]),
    ([returning(Pending("waiting")), returning(Pending("waiting too"))], [7.0]),
    # A stock delay as long as a parked one stays Kopf's, with its sleep and touch: by position.
    ([returning(Pending("waiting")), raising(kopf.TemporaryError("long", delay=PARKED_DELAY))],
     [7.0, PARKED_DELAY]),
    ([raising(kopf.TemporaryError("long", delay=PARKED_DELAY))], [7.0, PARKED_DELAY]),
])
async def test_apply_drops_exactly_the_delays_of_our_handlers(
    fns: list[Counted], passed: list[float], fake_apply: list[dict[str, Any]], logger: logging.Logger
) -> None:
    cause, kopf_delays = await cycle_of(*fns, logger=logger)
    apply: Any = application.apply  # the patched one, as Kopf's reactor looks it up
    assert await apply(delays=kopf_delays, patch=cause.patch, logger="L") == "applied"
    [call] = fake_apply
    assert [round(delay) for delay in call["delays"]] == [round(delay) for delay in passed]


async def test_a_ledger_is_for_its_own_cycle_only(fake_apply: list[dict[str, Any]], logger: logging.Logger) -> None:
    """A cycle that never reached apply() leaves nothing for the next one: the ledger is keyed by
    the cycle's own patch object."""
    _, kopf_delays = await cycle_of(returning(Pending("waiting")), logger=logger)
    apply: Any = application.apply
    await apply(delays=kopf_delays, patch={"another": "cycle"}, logger="L")
    await apply(delays=kopf_delays, patch={"another": "cycle"}, logger="L")
    assert [call["delays"] for call in fake_apply] == [kopf_delays, kopf_delays]


async def test_apply_without_delays_passes_everything_on(fake_apply: list[dict[str, Any]]) -> None:
    apply: Any = application.apply
    await apply(patch={})
    assert fake_apply == [{"patch": {}}]


# --- stock parity ----------------------------------------------------------------------------------


PLAIN = [
    ("dict", lambda: returning({"x": 1}), {}),
    ("none", lambda: returning(None), {}),
    ("false", lambda: returning(False), {}),
    ("temporary", lambda: raising(kopf.TemporaryError("later", delay=7)), {}),
    ("temporary-last-retry", lambda: raising(kopf.TemporaryError("later", delay=7)), {"retries": 1}),
    ("permanent", lambda: raising(kopf.PermanentError("never")), {}),
    ("value-error", lambda: raising(ValueError("bad value")), {}),
    ("value-error-permanent", lambda: raising(ValueError("bad")), {"errors": "PERMANENT"}),
    ("value-error-ignored", lambda: raising(ValueError("bad")), {"errors": "IGNORED"}),
    ("value-error-backoff", lambda: raising(ValueError("bad")), {"backoff": 3.0}),
]


async def run_plain(make: Callable[[], Counted], options: dict[str, Any], logger: logging.Logger,
                    collector: Collector) -> tuple[Any, list[tuple[int, str]], dict[str, Any]]:
    collector.records.clear()
    cause = changing_cause(BODY, logger)
    outcomes = await run_handlers([handler(make().fn, **options)], cause)
    return outcomes["h"], collector.pairs(), dict(cause.patch)


@pytest.mark.parametrize(("make", "options"), [p[1:] for p in PLAIN], ids=[p[0] for p in PLAIN])
async def test_plain_handlers_behave_as_in_stock_kopf(
    make: Callable[[], Counted], options: dict[str, Any],
    unpatched: None, logger: logging.Logger, collector: Collector,
) -> None:
    stock, stock_logs, stock_patch = await run_plain(make, options, logger, collector)
    kopf_outcomes.install(entry_points=False)
    ours, our_logs, our_patch = await run_plain(make, options, logger, collector)

    assert ours.final == stock.final
    assert ours.result == stock.result
    assert ours.delay == stock.delay
    assert type(ours.exception) is type(stock.exception)
    assert str(ours.exception) == str(stock.exception)
    assert our_logs == stock_logs
    assert our_patch == stock_patch


# --- plugins in the patched flow -------------------------------------------------------------------


class Observer:
    def __init__(self) -> None:
        self.seen: list[Outcome] = []

    @hookimpl
    def kopf_outcomes_observe_outcome(
        self, run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]
    ) -> None:
        self.seen.append(outcome)
        patch.setdefault("status", {})["observed"] = type(outcome).__name__


async def test_observers_write_into_the_objects_patch(unpatched: None, logger: logging.Logger) -> None:
    observer = Observer()
    kopf_outcomes.install(entry_points=False, plugins=[observer])
    cause = changing_cause(BODY, logger)
    await run_handlers([handler(returning(Pending("waiting")).fn)], cause)
    assert observer.seen == [Pending("waiting")]
    assert cause.patch["status"] == {"observed": "Pending"}
    assert records_in(cause.patch)["h"]["outcome"] == "pending"


async def test_observers_are_told_of_stock_decisions_too(
    unpatched: None, logger: logging.Logger
) -> None:
    observer = Observer()
    kopf_outcomes.install(entry_points=False, plugins=[observer])
    cause = changing_cause(BODY, logger)
    outcomes = await run_handlers([handler(raising(kopf.TemporaryError("later", delay=7)).fn)], cause)
    assert outcomes["h"].delay == 7  # Kopf decided
    assert observer.seen == [Retry("later", delay=7, level=logging.ERROR)]


async def test_a_failing_observer_turns_any_outcome_into_a_retry(
    unpatched: None, logger: logging.Logger, collector: Collector
) -> None:
    class Down:
        @hookimpl
        def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome,
                                          patch: MutableMapping[str, Any]) -> None:
            raise OSError("metrics down")

    kopf_outcomes.install(entry_points=False, plugins=[Down()])
    cause = changing_cause(BODY, logger)
    outcomes = await run_handlers([handler(returning(Success()).fn, retries=1)], cause)
    assert outcomes["h"].final is False
    assert isinstance(outcomes["h"].exception, kopf.TemporaryError)
    errors = collector.messages(logging.ERROR)
    assert errors and "plugin" in errors[-1] and "metrics down" in errors[-1]


async def test_a_plugin_failure_is_never_turned_final_by_retries(
    unpatched: None, logger: logging.Logger, collector: Collector
) -> None:
    class Broken:
        @hookimpl
        def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None:
            raise RuntimeError("adjuster bug")

    kopf_outcomes.install(entry_points=False, plugins=[Broken()])
    cause = changing_cause(BODY, logger)
    outcomes = await run_handlers([handler(returning({"x": 1}).fn, retries=1, backoff=2.0)], cause)

    outcome = outcomes["h"]
    assert outcome.final is False
    assert outcome.delay == 2.0
    assert isinstance(outcome.exception, kopf.TemporaryError)
    [error] = collector.messages(logging.ERROR)
    assert "adjuster bug" in error and "the finalizer is kept" in error


async def test_remember_rewakes_a_finished_handler_when_the_state_moved_on(
    installed: Any, logger: logging.Logger
) -> None:
    fn = returning({"x": 1})
    handler_options(remember=True)(fn.fn)
    h = handler(fn.fn)
    first = changing_cause(BODY, logger, reason=Reason.UPDATE)
    outcomes = await run_handlers([h], first)
    assert outcomes["h"].final is True
    assert records_in(first.patch)["h"]["outcome"] == "success"
    done = parked_state([h], outcomes)
    assert done["h"].finished

    same = changing_cause(body_after(first), logger, reason=Reason.UPDATE)
    assert await run_handlers([h], same, done) == {}
    assert fn.calls == 1

    moved = changing_cause(body_after(first, spec={"size": 2}), logger, reason=Reason.UPDATE)
    await run_handlers([h], moved, done)
    assert fn.calls == 2


async def test_a_forged_retained_record_neither_holds_nor_releases_a_pending_handler(
    installed: Any, logger: logging.Logger
) -> None:
    """Issue 10 (chaos): a Pending handler's progress carries the parked mark, not the retained one."""
    counted = Counted(lambda: Pending("waiting"))
    h = handler(counted.fn)
    first = changing_cause(BODY, logger, reason=Reason.DELETE)
    state = parked_state([h], await run_handlers([h], first))
    forged = json.dumps({"h": {"digest": "0", "outcome": "retained", "reason": "r", "parked": True}})
    body = body_after(first)
    body["metadata"]["annotations"] = {**body["metadata"].get("annotations", {}),
                                       MEMORY_ANNOTATION: forged, RELEASE_ANNOTATION: "h"}
    again = changing_cause(body, logger, reason=Reason.DELETE)
    outcomes = await run_handlers([h], again, state)
    assert counted.calls == 2  # not held: the forged record is ignored, the handler runs as Pending
    assert outcomes["h"].final is False  # not released either: the finalizer stays


# --- outside of a reaction cycle (daemons, timers): the memory is read only where it exists --------


async def test_outside_a_cycle_a_stock_success_clears_the_handlers_old_record(
        installed: Plugins, logger: logging.Logger) -> None:
    pending = changing_cause(BODY, logger)
    await run_handler(handler(returning(Pending("waiting")).fn), pending)
    assert set(records_in(pending.patch)) == {"h"}
    later = changing_cause(body_after(pending), logger)
    outcome = await run_handler(handler(returning(None).fn), later)
    assert outcome.final and outcome.exception is None
    assert records_in(later.patch) is None  # the memory's last record is gone: the annotation too


async def test_outside_a_cycle_without_memory_observers_are_told_and_nothing_is_written(
        installed: Plugins, logger: logging.Logger) -> None:
    seen: list[tuple[str, Outcome, float]] = []

    class Observer:
        @hookimpl
        def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome,
                                          patch: MutableMapping[str, Any]) -> None:
            seen.append((run.handler_id, outcome, run.runtime))

    installed.register(Observer(), name="observer")
    cause = changing_cause(BODY, logger)
    outcome = await run_handler(handler(returning({"done": 1}).fn), cause)
    assert outcome.final and outcome.result is not None
    [(handler_id, told, runtime)] = seen
    assert (handler_id, told) == ("h", Success({"done": 1}))
    assert 0 <= runtime < 60  # Kopf's runtime of a handler that started in this test
    assert records_in(cause.patch) == "absent"


async def test_runtime_in_floats_is_kopfs_runtime() -> None:
    from kopf_outcomes._kopf.internals import runtime_of
    from tests.unit.kopf_objects import state_for

    the_handler = handler(returning(None).fn)
    state = state_for([the_handler])[the_handler.id]
    assert abs(runtime_of(state) - state.runtime.total_seconds()) < 0.01


async def test_observers_get_every_field_of_the_run_in_its_place(
        installed: Plugins, logger: logging.Logger) -> None:
    seen: list[HandlerRun] = []

    class Observer:
        @hookimpl
        def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome,
                                          patch: MutableMapping[str, Any]) -> None:
            seen.append(run)

    installed.register(Observer(), name="observer")
    cause = changing_cause(BODY, logger)
    await run_handlers([handler(returning(None).fn, backoff=7)], cause)
    [run] = seen
    assert isinstance(run, HandlerRun)
    fields = run._asdict()
    assert 0 <= fields.pop("runtime") < 60
    assert fields.pop("body")["metadata"]["uid"] == "uid-1"
    assert fields == {
        "handler_id": "h", "reason": "delete", "resource": kopf_outcomes.ResourceRef("kopf.dev", "v1", "kopfexamples"),
        "retry": 0, "deleting": True, "options": kopf_outcomes.HandlerOptions(), "logger": cause.logger,
        "previous": None, "errors_mode": "TEMPORARY", "backoff": 7.0, "kind": "change",
        "finalizer": "kopf.zalando.org/KopfFinalizerMarker", "siblings": {},  # the only handler of the cause
    }
