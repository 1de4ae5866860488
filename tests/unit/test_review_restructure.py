"""
Attempts to break the restructured hot path of one handler run (issue 45: ``translation.effective``
then ``realize`` then ``concluding.conclude``; the release of a retained handler in ``releases``;
``Runs.begin``; ``cycle.NONE_YET`` for a cycle with no memory; ``reaction.select`` as one loop),
each through Kopf's real processing of one object. Each scenario records what Kopf wrote and
logged and what the observers were told (``trace``); run with ``KOPF_OUTCOMES_TRACE_DIR`` set, the
traces are written there, so that two trees can be compared (the review compared the tree before
the restructuring, 71b4678, with the one after: the same traces). The assertions are the
behaviour both trees showed.
"""
from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import Fatal, Outcome, Pending, Retry, Success
from kopf_outcomes._kopf import unrecorded
from kopf_outcomes.memory import DEFAULT_KEYS
from tests.unit.one_object import Operator, Server, server
from tests.unit.releases import stamped

__all__ = ["server"]

RESOURCE = ("kopf.dev", "v1", "kopfexamples")


class Observer:
    """An observer that records what it is told, and fails as many times as it is armed for a handler."""

    armed: dict[str, int] = {}
    told: list[tuple[str, str, str]] = []

    @kopf_outcomes.hookimpl
    def kopf_outcomes_observe_outcome(self, run: kopf_outcomes.HandlerRun, outcome: Outcome, patch: Any) -> None:
        Observer.told.append((run.handler_id, str(getattr(run.kind, 'value', run.kind)), type(outcome).__name__))
        if Observer.armed.get(run.handler_id, 0) > 0:
            Observer.armed[run.handler_id] -= 1
            raise RuntimeError("the metrics backend is down")


class UnreadableOptions:
    """An options plugin that fails for the handler ``broken`` (its options cannot be read)."""

    @kopf_outcomes.hookimpl
    def kopf_outcomes_handler_options(self, handler_id: str, resource: Any) -> Any:
        if handler_id.startswith("broken"):
            raise RuntimeError("the options backend is down")
        return None


@pytest.fixture(autouse=True)
def installed(unpatched: None) -> Iterator[None]:
    kopf_outcomes.install(entry_points=False, events=False, plugins=[Observer()])
    Observer.armed, Observer.told = {}, []
    unrecorded._final.clear()  # this process's conclusions: each test is a new process
    yield
    unrecorded._final.clear()


class Odd(Outcome):
    """An Outcome of a user's own making."""


class OddWithBadChoice(Outcome):
    """An Outcome of a user's own making that carries an on_delete that is no choice (a fault)."""

    on_delete = "maybe"


_STAMPISH = re.compile(r"\d{4}-\d\d-\d\dT[0-9:.+]+|@[A-Za-z0-9_-]{4,}|\b\d+(\.\d+)?\b")


def _plain(text: str) -> str:
    return _STAMPISH.sub("#", text)


class Trace:
    """What each event did: the logs (our and Kopf's per-object, INFO and up), the records (outcome,
    reason, parked), the finalizer, the observers told."""

    def __init__(self, name: str, caplog: pytest.LogCaptureFixture) -> None:
        self.name, self.caplog, self.steps = name, caplog, []  # type: ignore[var-annotated]
        caplog.set_level(logging.INFO)

    def step(self, server: Server) -> None:
        logs = [(record.levelname, _plain(record.getMessage())) for record in self.caplog.records
                if record.levelno >= logging.INFO and (record.name.startswith("kopf_outcomes")
                                                       or record.name == "kopf.objects")]
        self.caplog.clear()
        records = {handler_id: {key: record.get(key) for key in ("outcome", "parked", "acted")}
                   | {"reason": _plain(str(record.get("reason")))}
                   for handler_id, record in sorted(server.records().items())}
        self.steps.append({"logs": logs, "records": records, "finalized": server.finalized,
                           "release": _plain(str(server.annotations.get(DEFAULT_KEYS.release))),
                           "told": list(Observer.told)})
        Observer.told.clear()

    def dump(self) -> None:
        where = os.environ.get("KOPF_OUTCOMES_TRACE_DIR")
        if where:
            with open(os.path.join(where, f"{self.name}.json"), "w") as file:
                json.dump(self.steps, file, indent=1, sort_keys=True)


def deletion_operator(server: Server, fns: dict[str, Callable[..., Any]], **options: Any) -> Operator:
    registry = kopf.OperatorRegistry()
    for handler_id, fn in fns.items():
        kopf.on.delete(*RESOURCE, registry=registry, id=handler_id, **options)(fn)
    return Operator(server, registry)


async def events(op: Operator, server: Server, trace: Trace, count: int = 1, aged: float = 0) -> None:
    for index in range(count):
        if index and aged:
            server.age(aged)
        await op.event()
        trace.step(server)


def returning(runs: list[str], name: str, outcome: Callable[[], object]) -> Callable[..., Any]:
    def fn(**_: Any) -> Any:
        runs.append(name)
        made = outcome()
        if isinstance(made, BaseException):
            raise made
        return made
    return fn


# --- the substitutions that realize made inline, now translation.effective -------------------------

@pytest.mark.parametrize("made", [Odd, OddWithBadChoice])
async def test_an_outcome_of_a_users_own_making_is_a_retry_that_keeps_the_finalizer(
        server: Server, caplog: pytest.LogCaptureFixture, made: type[Outcome]) -> None:
    trace = Trace(f"odd-{made.__name__}", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"h0": returning(runs, "a", lambda: made("mine"))})
    await events(op, server, trace, 2, aged=3600)
    trace.dump()
    assert not server.finalized and runs == ["a", "a"]
    levels = [level for level, message in trace.steps[0]["logs"] if "unknown outcome type" in message
              or "held:" in message]
    assert levels and set(levels) == {"ERROR"}, trace.steps[0]["logs"]
    told = trace.steps[0]["told"]
    assert told and all(kind == "change" for _, kind, _ in told), told
    assert told[-1][2] in ("Retry", "PluginFailure"), told


async def test_a_handler_whose_options_cannot_be_read_is_held_on_each_outcome(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    kopf_outcomes.install(entry_points=False, events=False, plugins=[Observer(), UnreadableOptions()])
    trace = Trace("unread-options", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"broken-a": returning(runs, "a", lambda: Success()),
                                    "broken-b": returning(runs, "b", lambda: kopf.PermanentError("stock")),
                                    "broken-c": returning(runs, "c", lambda: Odd("odd"))})
    await events(op, server, trace, 3)
    trace.dump()
    assert not server.finalized
    assert any("held:" in message for _, message in trace.steps[0]["logs"])


# --- a person's release, now releases.released -----------------------------------------------------

@pytest.mark.parametrize("observer_fails", [False, True])
async def test_a_persons_release_of_a_retained_handler(server: Server, caplog: pytest.LogCaptureFixture,
                                                      observer_fails: bool) -> None:
    trace = Trace(f"release-observer-fails-{observer_fails}", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"h0": returning(runs, "a", lambda: Fatal("refused", on_delete="retain"))})
    await events(op, server, trace, 2)
    assert server.records()["h0"]["outcome"] == "retained" and not server.finalized
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "h0")
    Observer.armed["h0"] = 1 if observer_fails else 0
    await events(op, server, trace)
    if observer_fails:
        assert not server.finalized and "deadline" in server.records()["h0"]
        server.age(3600)
        await events(op, server, trace, 2)
    trace.dump()
    assert server.finalized and runs == ["a"]
    assert any(kind == "change" and name == "Fatal" for _, kind, name in trace.steps[-1]["told"]
               + trace.steps[-2]["told"])


async def test_fatal_on_delete_retain_with_kopfs_own_permanent_error(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    trace = Trace("retain-stock-permanent", caplog)
    runs: list[str] = []
    fn = kopf_outcomes.handler_options(fatal_on_delete="retain")(
        returning(runs, "a", lambda: kopf.PermanentError("gone wrong")))
    op = deletion_operator(server, {"h0": fn})
    await events(op, server, trace, 2)
    assert not server.finalized and server.records()["h0"]["outcome"] == "retained"
    assert ("h0", "change", "Fatal") in trace.steps[0]["told"]
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "h0")
    await events(op, server, trace, 2)
    trace.dump()
    assert server.finalized and runs == ["a"]


def parent_with_a_retaining_child(runs: list[str]) -> Any:
    """A parent whose sub-handler ``a`` retains (a Fatal, ``on_delete="retain"``) and ``b`` retries."""
    async def parent(**_: Any) -> None:
        runs.append("parent")
        await kopf.execute(fns={"a": returning(runs, "a", lambda: Fatal("refused", on_delete="retain")),
                                "b": returning(runs, "b", lambda: kopf.TemporaryError("later", delay=1))})
    return parent


async def test_a_parent_with_a_retained_child_ended_by_its_timeout(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    trace = Trace("parent-timeout-retained-child", caplog)
    runs: list[str] = []

    op = deletion_operator(server, {"parent": parent_with_a_retaining_child(runs)}, retries=2)
    await events(op, server, trace, 2)
    server.age(3600)
    await events(op, server, trace, 4)
    assert not server.finalized, trace.steps
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "parent/a")
    server.age(3600)
    await events(op, server, trace, 4)
    trace.dump()
    assert runs.count("a") == 1


# --- Kopf's own runs, with no memory: select as one loop, NONE_YET ------------------------------------

async def test_stock_handlers_with_no_memory_leave_none(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    trace = Trace("stock-no-memory", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"h0": returning(runs, "a", lambda: kopf.TemporaryError("later", delay=1)),
                                    "h1": returning(runs, "b", lambda: None)})
    await events(op, server, trace, 3, aged=3600)
    trace.dump()
    assert DEFAULT_KEYS.memory not in server.annotations
    assert runs.count("b") == 1 and runs.count("a") == 3 and not server.finalized


@pytest.mark.parametrize("outcome", ["pending", "retry", "success", "fatal"])
async def test_an_event_handlers_outcomes(server: Server, caplog: pytest.LogCaptureFixture, outcome: str) -> None:
    """A stock kind (``@kopf.on.event``): the kind's row of the table, no memory written to."""
    trace = Trace(f"event-{outcome}", caplog)
    runs: list[str] = []
    made = {"pending": lambda: Pending("later"), "retry": lambda: Retry("again", delay=1),
            "success": lambda: Success(), "fatal": lambda: Fatal("no", on_delete="retain")}[outcome]
    registry = kopf.OperatorRegistry()
    kopf.on.event(*RESOURCE, registry=registry, id="ev")(returning(runs, "ev", made))
    kopf.on.delete(*RESOURCE, registry=registry, id="h0")(returning(runs, "h0", lambda: None))
    op = Operator(server, registry)
    await events(op, server, trace, 2)
    trace.dump()
    assert DEFAULT_KEYS.memory not in server.annotations or "ev" not in server.records()


async def test_a_pending_sub_handler_parks_its_parent_and_a_change_wakes_both(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    trace = Trace("pending-sub-handler", caplog)
    runs: list[str] = []
    ready = {"yes": False}

    async def parent(**_: Any) -> None:
        runs.append("parent")
        await kopf.execute(fns={"a": returning(runs, "a", lambda: Success() if ready["yes"] else Pending("not yet"))})

    op = deletion_operator(server, {"parent": parent})
    await events(op, server, trace, 2)
    assert not server.finalized and server.records()["parent/a"]["outcome"] == "pending"
    ready["yes"] = True
    server.body["spec"] = {"v": 2}
    await events(op, server, trace, 2)
    trace.dump()
    assert server.finalized


# --- every kind of handler, each outcome: the kind's row of the table, as before ----------------------

_KINDS = ["change", "timer", "daemon", "activity", "webhook", "event", "index"]
_OUTCOMES: dict[str, Callable[[], object]] = {
    "success": lambda: Success(), "pending": lambda: Pending("later", recheck=30),
    "retry": lambda: Retry("again", delay=7),
    "fatal-retain": lambda: Fatal("no", on_delete="retain"), "fatal": lambda: Fatal("no"), "odd": lambda: Odd("odd"),
    "odd-bad-choice": lambda: OddWithBadChoice("odd"), "permanent": lambda: kopf.PermanentError("stock"),
    "temporary": lambda: kopf.TemporaryError("stock", delay=5), "plain": lambda: None,
    "error": lambda: RuntimeError("boom"),
}


def _kopf_outcome(outcome: Any) -> dict[str, Any]:
    return {"final": outcome.final, "delay": outcome.delay, "result": repr(getattr(outcome.result, "returned", None)),
            "exception": type(outcome.exception).__name__ if outcome.exception is not None else None,
            "message": _plain(str(outcome.exception)) if outcome.exception is not None else None}


@pytest.mark.parametrize("observer_fails", [False, True])
@pytest.mark.parametrize("outcome", list(_OUTCOMES))
@pytest.mark.parametrize("kind", _KINDS)
async def test_each_kinds_outcome_through_kopfs_execute_handlers_once(
        caplog: pytest.LogCaptureFixture, request: pytest.FixtureRequest, kind: str, outcome: str,
        observer_fails: bool) -> None:
    from tests.unit.kopf_objects import cause_of, handler_of, run_handlers
    from tests.unit.one_object import deleting
    trace = Trace(f"kind-{kind}-{outcome}-{observer_fails}", caplog)
    handler = handler_of(kind, returning([], kind, _OUTCOMES[outcome]), id="h0")
    cause = cause_of(kind, deleting(), logging.getLogger("kopf.objects"))
    Observer.armed["h0"] = 1 if observer_fails else 0
    try:
        found = await run_handlers([handler], cause)
    except Exception as e:  # a crash on an unusual path is a finding: traced, and compared
        found = {"crash": type(e).__name__}
    patch = dict(getattr(cause, "patch", {}) or {})
    logs = [(record.levelname, _plain(record.getMessage())) for record in caplog.records
            if record.levelno >= logging.INFO]
    trace.steps.append({"outcomes": {key: value if isinstance(value, str) else _kopf_outcome(value)
                                     for key, value in found.items()},
                        "patch": _plain(json.dumps(patch, sort_keys=True, default=str)), "logs": logs,
                        "told": list(Observer.told)})
    trace.dump()
    assert "crash" not in found, found


# --- found: an Outcome of a user's own making where the kind's row refuses outcomes ---------------------

# Fixed: translation.refuse formatted the outcome with repr(), and Outcome.__repr__ called _fields(), which
# an Outcome subclass of a user's own making did not define (NotImplementedError): the crash left Kopf's
# processing of the whole event, so the object's deletion handlers did not run on it (also on 71b4678).
# Outcome._fields now defaults to the reason.
@pytest.mark.parametrize("kind", ["event", "index"])
async def test_an_outcome_of_a_users_own_making_from_an_event_or_index_handler_is_refused_not_a_crash(
        server: Server, caplog: pytest.LogCaptureFixture, kind: str) -> None:
    from tests.unit.kopf_objects import cause_of, handler_of, run_handlers
    from tests.unit.one_object import deleting
    handler = handler_of(kind, returning([], kind, lambda: Odd("mine")), id="h0")
    found = await run_handlers([handler], cause_of(kind, deleting(), logging.getLogger("kopf.objects")))
    assert found["h0"].final and isinstance(found["h0"].exception, kopf.PermanentError)
    assert any("Odd" in record.getMessage() for record in caplog.records if record.levelno == logging.ERROR)


async def test_an_event_handlers_outcome_of_a_users_own_making_does_not_stop_the_deletion(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    runs: list[str] = []
    registry = kopf.OperatorRegistry()
    kopf.on.event(*RESOURCE, registry=registry, id="ev")(returning(runs, "ev", lambda: Odd("mine")))
    kopf.on.delete(*RESOURCE, registry=registry, id="h0")(returning(runs, "h0", lambda: None))
    op = Operator(server, registry)
    crashed = None
    try:
        await op.event()
    except Exception as e:  # Kopf's worker logs it and waits for the next event
        crashed = e
    assert "h0" in runs and server.finalized, (runs, repr(crashed))


# --- a handler outside of a cycle (callers of Kopf's internals): a retained mark with no record of it -----

@pytest.mark.parametrize("memory_of", ["none", "another-handler", "another-object"])
@pytest.mark.parametrize("kind", ["change", "timer"])
async def test_a_retained_mark_outside_of_a_cycle_with_no_retained_record_runs_the_handler_as_kopf_would(
        caplog: pytest.LogCaptureFixture, kind: str, memory_of: str) -> None:
    """``Runs.execute_handler_once`` entered directly: before, a cycle was made for a retained mark
    and kept for the conclusion; now the conclusion makes its own where it needs one."""
    from kopf_outcomes._kopf.marks import RETAINED_MARK
    from tests.unit.kopf_objects import cause_of, handler_of, run_handler, state_for
    from tests.unit.one_object import deleting
    trace = Trace(f"outside-{kind}-{memory_of}", caplog)
    runs: list[str] = []
    handler = handler_of(kind, returning(runs, "h0", lambda: None), id="h0")
    other = {"h9": {"outcome": "success", "reason": "", "since": "2026-12-04T00:00:00+00:00", "digest": "d",
                    "uid": "u1" if memory_of == "another-handler" else "u0"}}
    body = deleting(metadata={"annotations": {DEFAULT_KEYS.memory: json.dumps(other)}}) \
        if memory_of != "none" else deleting()
    await run_handler(handler, cause_of(kind, body, logging.getLogger("kopf.objects")))  # unmarked: Kopf's own
    unmarked = [told_kind for _, told_kind, _ in Observer.told]
    Observer.told.clear()
    runs.clear()
    cause = cause_of(kind, body, logging.getLogger("kopf.objects"))
    state = state_for([handler]).with_outcomes({handler.id: _retained_outcome(RETAINED_MARK)})
    found = await run_handler(handler, cause, state)
    trace.steps.append({"outcome": _kopf_outcome(found), "told": list(Observer.told),
                        "patch": _plain(json.dumps(dict(cause.patch), sort_keys=True, default=str)),
                        "logs": [(record.levelname, _plain(record.getMessage())) for record in caplog.records
                                 if record.levelno >= logging.INFO]})
    trace.dump()
    assert runs == ["h0"] and found.final
    # Told as the same run without the mark is (Runs.concluded: "a run that no cycle started is told as
    # a change's" where the object has no memory). On 71b4678 a timer's run with the mark and no memory
    # was told as a timer's (the cycle made for the mark was kept for the conclusion): a difference,
    # toward the documented rule.
    assert [told_kind for _, told_kind, _ in Observer.told] == unmarked, (Observer.told, unmarked)


def _retained_outcome(mark: str) -> Any:
    from tests.unit.kopf_objects import execution
    return execution.Outcome(final=False, exception=kopf.TemporaryError("refused" + mark, delay=10 ** 8),
                             delay=10 ** 8)


# --- more histories, traced: sub-handlers, rechecks, limits, a live object -------------------------------

def _live(uid: str = "u1") -> dict[str, Any]:
    return {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "spec": {"v": 1},
            "metadata": {"name": "x", "namespace": "ns", "uid": uid, "resourceVersion": "1"}}


@pytest.mark.parametrize("made", ["odd", "odd-bad-choice", "permanent-retain", "retry", "pending"])
async def test_a_sub_handlers_outcomes_under_its_parent(server: Server, caplog: pytest.LogCaptureFixture,
                                                       made: str) -> None:
    trace = Trace(f"sub-{made}", caplog)
    runs: list[str] = []
    child: Callable[..., Any] = returning(runs, "a", {
        "odd": lambda: Odd("mine"), "odd-bad-choice": lambda: OddWithBadChoice("mine"),
        "permanent-retain": lambda: kopf.PermanentError("stock"), "retry": lambda: Retry("again", delay=5),
        "pending": lambda: Pending("later", recheck=20)}[made])
    if made == "permanent-retain":
        child = kopf_outcomes.handler_options(fatal_on_delete="retain")(child)

    async def parent(**_: Any) -> None:
        runs.append("parent")
        await kopf.execute(fns={"a": child, "b": returning(runs, "b", lambda: None)})

    Observer.armed["parent/a"] = 1
    op = deletion_operator(server, {"parent": parent}, retries=3)
    await events(op, server, trace, 6, aged=3600)
    trace.dump()
    assert runs.count("b") == 1
    if made in ("odd-bad-choice", "pending", "permanent-retain"):  # an Odd is a Retry: the parent's retries= end it
        assert not server.finalized


@pytest.mark.parametrize("observer_fails", [0, 1, 3])
async def test_a_rechecking_handler_over_time(server: Server, caplog: pytest.LogCaptureFixture,
                                              observer_fails: int) -> None:
    trace = Trace(f"recheck-{observer_fails}", caplog)
    runs: list[str] = []
    answers = iter([Pending("later", recheck=20)] * 4 + [Success()] * 10)
    op = deletion_operator(server, {"h0": returning(runs, "a", lambda: next(answers))})
    Observer.armed["h0"] = observer_fails
    await events(op, server, trace, 10, aged=70)
    trace.dump()
    assert server.finalized


@pytest.mark.parametrize("outcome", ["retry", "temporary", "held"])
async def test_retries_run_out(server: Server, caplog: pytest.LogCaptureFixture, outcome: str) -> None:
    kopf_outcomes.install(entry_points=False, events=False, plugins=[Observer(), UnreadableOptions()])
    trace = Trace(f"retries-{outcome}", caplog)
    runs: list[str] = []
    made = {"retry": lambda: Retry("again", delay=5), "temporary": lambda: kopf.TemporaryError("again", delay=5),
            "held": lambda: None}[outcome]
    op = deletion_operator(server, {("broken" if outcome == "held" else "h0"): returning(runs, "a", made)},
                           retries=2)
    await events(op, server, trace, 5, aged=3600)
    trace.dump()
    if outcome == "held":
        assert not server.finalized


@pytest.mark.parametrize("first", ["pending", "retry", "fatal", "odd"])
async def test_a_live_objects_create_and_update_handlers(server: Server, caplog: pytest.LogCaptureFixture,
                                                        first: str) -> None:
    trace = Trace(f"live-{first}", caplog)
    server.body = _live()
    runs: list[str] = []
    answers = {"pending": Pending("later"), "retry": Retry("again", delay=5), "fatal": Fatal("no"),
               "odd": Odd("mine")}
    registry = kopf.OperatorRegistry()
    kopf.on.create(*RESOURCE, registry=registry, id="c")(returning(runs, "c", lambda: answers[first]))
    kopf.on.update(*RESOURCE, registry=registry, id="u", field="spec")(returning(runs, "u", lambda: Success()))
    kopf.on.delete(*RESOURCE, registry=registry, id="d")(returning(runs, "d", lambda: None))
    op = Operator(server, registry)
    await events(op, server, trace, 3, aged=3600)
    server.body["spec"] = {"v": 2}
    await events(op, server, trace, 3, aged=3600)
    server.body["metadata"]["deletionTimestamp"] = "2026-12-04T00:00:00Z"
    await events(op, server, trace, 3, aged=3600)
    trace.dump()


@pytest.mark.parametrize("then", ["retry", "error", "pending", "success"])
async def test_a_handler_that_recalls_its_memory(server: Server, caplog: pytest.LogCaptureFixture, then: str) -> None:
    """``recall()`` in a cycle with no memory yet (``cycle.NONE_YET``): its key kept as the outcome says."""
    trace = Trace(f"recall-{then}", caplog)
    keys: list[tuple[bool, str]] = []
    answers = iter([{"retry": Retry("again", delay=5), "error": RuntimeError("boom"), "pending": Pending("later"),
                     "success": Success()}[then]] + [Success()] * 5)

    def fn(**_: Any) -> Any:
        memory = kopf_outcomes.recall()
        keys.append((memory.acted_on_this_state, memory.idempotency_key))
        answer = next(answers)
        if isinstance(answer, RuntimeError):
            raise answer
        return answer

    Observer.armed["h0"] = 1
    op = deletion_operator(server, {"h0": fn})
    await events(op, server, trace, 4, aged=3600)
    trace.steps.append({"keys_repeat": [key == keys[0][1] for _, key in keys], "acted": [a for a, _ in keys]})
    trace.dump()


@pytest.mark.parametrize("fails_on", ["parent", "parent/a", "both"])
async def test_an_observer_failing_on_a_release_through_a_retained_child(
        server: Server, caplog: pytest.LogCaptureFixture, fails_on: str) -> None:
    """``releases.released``: a parent retained for its child (its retries= ran out), released by the
    child's stamp; an observer fails on the parent's release, the child's, or both."""
    trace = Trace(f"release-through-child-{fails_on.replace('/', '-')}", caplog)
    runs: list[str] = []

    op = deletion_operator(server, {"parent": parent_with_a_retaining_child(runs)}, retries=2)
    await events(op, server, trace, 6, aged=3600)
    assert not server.finalized and server.records()["parent"]["outcome"] == "retained"
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "parent/a")
    for handler_id in (["parent", "parent/a"] if fails_on == "both" else [fails_on]):
        Observer.armed[handler_id] = 1
    server.age(1)
    sent = len(server.sent)
    await events(op, server, trace, 1)
    assert not server.finalized, ("released while an observer failed on the release", server.sent[sent:])
    await events(op, server, trace, 4, aged=3600)
    trace.dump()
    assert server.finalized and runs.count("a") == 1, trace.steps[-5:]


def told(trace: Trace, handler_id: str) -> list[str]:
    """What the observers were told of this handler, over the whole trace (failed tellings too)."""
    return [name for step in trace.steps for told_id, _, name in step.get("told", []) if told_id == handler_id]


async def parents_release_retried(op: Operator, server: Server, trace: Trace, failures: int) -> str:
    """The parent retained for its child, released by the child's stamp; an observer fails on the
    parent's release ``failures`` times (the child's is told): the parent's release waits for its retry."""
    await events(op, server, trace, 6, aged=3600)
    release = stamped(server.annotations, "parent/a")
    server.annotations[DEFAULT_KEYS.release] = release
    Observer.armed["parent"] = failures
    server.age(1)
    await events(op, server, trace)
    assert not server.finalized and "parent/a" not in server.records()
    assert server.records()["parent"]["released_by"] == release  # the child's release concluded, its record gone
    assert server.annotations[DEFAULT_KEYS.release] == release  # left to the parent's release
    return release


async def test_a_release_through_a_child_stands_while_the_parents_observer_fails_twice(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    trace = Trace("release-through-child-parent-fails-twice", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"parent": parent_with_a_retaining_child(runs)}, retries=2)
    release = await parents_release_retried(op, server, trace, failures=2)
    server.age(3600)
    await events(op, server, trace)  # the retry: the observer fails again
    assert not server.finalized and server.annotations[DEFAULT_KEYS.release] == release
    assert server.records()["parent"]["released_by"] == release
    server.age(3600)
    await events(op, server, trace, 2)
    trace.dump()
    assert server.finalized and runs.count("a") == 1, trace.steps[-3:]
    assert DEFAULT_KEYS.release not in server.annotations  # consumed as the parent's release was told
    assert told(trace, "parent/a").count("Fatal") == 2  # retained, then released: told once each
    assert told(trace, "parent")[-3:] == ["Fatal", "Fatal", "Fatal"]  # failed twice, told the third time


@pytest.mark.parametrize("then", ["withdrawn", "unstamped", "another-stamp", "star"])
async def test_a_release_through_a_child_withdrawn_while_the_parents_retry_waits_releases_nothing(
        server: Server, caplog: pytest.LogCaptureFixture, then: str) -> None:
    """The retry of the parent's release releases nothing the annotation no longer releases: the
    entry that released the child is gone (removed, or replaced by a form that answers no retention)."""
    trace = Trace(f"release-through-child-{then}", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"parent": parent_with_a_retaining_child(runs)}, retries=2)
    release = await parents_release_retried(op, server, trace, failures=1)
    replaced = {"unstamped": "parent/a", "another-stamp": release.replace("@", "@0"), "star": "*"}.get(then)
    if replaced is None:
        del server.annotations[DEFAULT_KEYS.release]
    else:
        server.annotations[DEFAULT_KEYS.release] = replaced
    server.age(3600)
    await events(op, server, trace, 2)
    assert not server.finalized, trace.steps[-2:]
    assert server.records()["parent"]["outcome"] == "retained"
    assert "released_by" not in server.records()["parent"] and "deadline" not in server.records()["parent"]
    assert any("stays retained" in message for _, message in trace.steps[-2]["logs"]), trace.steps[-2]
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "parent")  # released again: by its own
    await events(op, server, trace, 2)
    trace.dump()
    assert server.finalized and runs.count("a") == 1, trace.steps[-2:]


async def test_another_handlers_release_leaves_the_annotation_to_a_parents_retried_release(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    """A retained handler released while the parent's release through its child waits for its retry,
    by the same annotation (the person added it): the annotation stays for the parent's retry."""
    trace = Trace("release-through-child-another-released", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"parent": parent_with_a_retaining_child(runs),
                                    "other": returning(runs, "o", lambda: Fatal("refused", on_delete="retain"))},
                           retries=2)
    release = await parents_release_retried(op, server, trace, failures=1)
    assert server.records()["other"]["outcome"] == "retained"
    server.annotations[DEFAULT_KEYS.release] = f"{release},{stamped(server.annotations, 'other')}"
    await events(op, server, trace)
    assert "other" not in server.records() and not server.finalized, trace.steps[-1]
    assert server.annotations.get(DEFAULT_KEYS.release), trace.steps[-1]  # still the parent's
    assert any(level == "WARNING" and "'parent' by the annotation" in message and "waits for its retry" in message
               for level, message in trace.steps[-1]["logs"]), trace.steps[-1]["logs"]
    server.age(3600)
    await events(op, server, trace, 2)
    trace.dump()
    assert server.finalized and runs.count("a") == 1 and runs.count("o") == 1, trace.steps[-2:]


def parent_with_two_retaining_children(runs: list[str]) -> Any:
    """A parent whose sub-handlers ``a`` and ``c`` retain, and ``b`` retries."""
    async def parent(**_: Any) -> None:
        runs.append("parent")
        await kopf.execute(fns={"a": returning(runs, "a", lambda: Fatal("refused", on_delete="retain")),
                                "c": returning(runs, "c", lambda: Fatal("refused", on_delete="retain")),
                                "b": returning(runs, "b", lambda: kopf.TemporaryError("later", delay=1))})
    return parent


@pytest.mark.parametrize("parents_observer_fails", [False, True])
async def test_a_parent_retained_with_two_children_is_released_with_the_last_of_them(
        server: Server, caplog: pytest.LogCaptureFixture, parents_observer_fails: bool) -> None:
    """The release of one of two retained sub-handlers releases it, not its parent: the other still
    retains the finalizer, and the parent waits with it until its release (the person's second)."""
    trace = Trace(f"release-through-two-children-{parents_observer_fails}", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"parent": parent_with_two_retaining_children(runs)}, retries=2)
    await events(op, server, trace, 6, aged=3600)
    assert {handler_id: record["outcome"] for handler_id, record in server.records().items()} == {
        "parent": "retained", "parent/a": "retained", "parent/c": "retained"}
    ran = len(runs)
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "parent/a")
    server.age(1)
    await events(op, server, trace, 2, aged=3600)
    assert not server.finalized, trace.steps[-2:]
    assert {handler_id: record["outcome"] for handler_id, record in server.records().items()} == {
        "parent": "retained", "parent/c": "retained"}, trace.steps[-2:]
    assert DEFAULT_KEYS.release not in server.annotations  # it answered the retention of parent/a
    assert any("parent/c" in message for _, message in trace.steps[-2]["logs"]), trace.steps[-2]["logs"]
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "parent/c")
    Observer.armed["parent"] = 1 if parents_observer_fails else 0
    await events(op, server, trace, 3, aged=3600)
    trace.dump()
    assert server.finalized and len(runs) == ran, (runs[ran:], trace.steps[-3:])
    assert told(trace, "parent/a").count("Fatal") == 2 and told(trace, "parent/c").count("Fatal") == 2


async def test_a_parent_released_through_one_child_waits_for_the_retried_release_of_another(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    """Two retained sub-handlers: the release of ``a`` is retried (an observer failed on it); ``c`` is
    released while it waits. The parent waits for the retry of ``a``'s release, then goes with it."""
    trace = Trace("release-through-two-children-one-retried", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"parent": parent_with_two_retaining_children(runs)}, retries=2)
    await events(op, server, trace, 6, aged=3600)
    ran = len(runs)
    first = stamped(server.annotations, "parent/a")
    server.annotations[DEFAULT_KEYS.release] = first
    Observer.armed["parent/a"] = 1
    server.age(1)
    await events(op, server, trace)
    assert not server.finalized and "deadline" in server.records()["parent/a"], trace.steps[-1]
    server.annotations[DEFAULT_KEYS.release] = f"{first},{stamped(server.annotations, 'parent/c')}"
    await events(op, server, trace)
    assert not server.finalized and "parent/c" not in server.records(), trace.steps[-1]
    assert server.records()["parent"]["deadline"] == server.records()["parent/a"]["deadline"]
    assert server.annotations.get(DEFAULT_KEYS.release), trace.steps[-1]  # still the retried release's
    server.age(3600)
    await events(op, server, trace, 2)
    trace.dump()
    assert server.finalized and len(runs) == ran, (runs[ran:], trace.steps[-2:])


async def test_a_parent_retained_with_a_retained_middle_sub_handler_is_released_through_both(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    """``parent/x`` is retained for its own retained ``parent/x/y`` (its retries= ran out): the release
    of ``y`` releases ``x`` through it, and the parent through ``x``, as a parent is released through
    its child (docs/howto/retain-finalizer.md); each told once, nothing runs again."""
    trace = Trace("release-through-a-middle-sub-handler", caplog)
    runs: list[str] = []

    async def middle(**_: Any) -> None:
        runs.append("x")
        await kopf.execute(fns={"y": returning(runs, "y", lambda: Fatal("refused", on_delete="retain")),
                                "z": returning(runs, "z", lambda: kopf.TemporaryError("later", delay=1))})

    async def parent(**_: Any) -> None:
        runs.append("parent")
        kopf.subhandler(id="x", retries=1)(middle)
        kopf.subhandler(id="b", retries=5)(returning(runs, "b", lambda: kopf.TemporaryError("later", delay=1)))

    op = deletion_operator(server, {"parent": parent}, retries=2)
    await events(op, server, trace, 8, aged=3600)
    assert {handler_id: record["outcome"] for handler_id, record in server.records().items()} == {
        "parent": "retained", "parent/x": "retained", "parent/x/y": "retained"}
    ran = len(runs)
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "parent/x/y")
    server.age(1)
    await events(op, server, trace, 2, aged=3600)
    trace.dump()
    assert server.finalized and len(runs) == ran, (runs[ran:], trace.steps[-2:])
    assert [told(trace, h)[-1:] for h in ("parent/x/y", "parent/x", "parent")] == [["Fatal"]] * 3, trace.steps
