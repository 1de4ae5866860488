"""
Attempts to break a person's release retried after an observer failed on it (releases.release,
the ``deadline`` of a retained record), and the memory written before the observers are told
(concluding.conclude), through Kopf's real processing of one object (:mod:`.one_object`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import Fatal, Outcome, Pending, Success
from kopf_outcomes._kopf import retentions, unrecorded
from kopf_outcomes.memory import DEFAULT_KEYS
from tests.unit.one_object import Operator, Server, server
from tests.unit.releases import stamped
from tests.unit.test_review_wave5 import deletion_operator, release, retaining, told_waits

__all__ = ["server"]

RESOURCE = ("kopf.dev", "v1", "kopfexamples")


@pytest.fixture(autouse=True)
def installed(unpatched: None) -> Iterator[None]:
    kopf_outcomes.install(entry_points=False, events=False, plugins=[Fails()])
    Fails.armed, Fails.told = {}, []
    unrecorded._final.clear()  # this process's conclusions: each test is a new process
    retentions._SAID.clear()  # and the retries it said to wait
    yield
    unrecorded._final.clear()


class Fails:
    """An observer that fails as many times as it is armed for a handler (a metrics backend down)."""

    armed: dict[str, int] = {}
    told: list[tuple[str, str]] = []

    @kopf_outcomes.hookimpl
    def kopf_outcomes_observe_outcome(self, run: kopf_outcomes.HandlerRun, outcome: Outcome, patch: Any) -> None:
        Fails.told.append((run.handler_id, type(outcome).__name__))
        if Fails.armed.get(run.handler_id, 0) > 0:
            Fails.armed[run.handler_id] -= 1
            raise RuntimeError("the metrics backend is down")


def due_within(waits: list[list[float]], seconds: float) -> bool:
    """Whether the last cycle told Kopf to look at the object again within ``seconds``."""
    return bool(waits) and any(0 < wait <= seconds for wait in waits[-1])


async def retained_and_release_failed(server: Server, op: Operator, handler_id: str = "h0") -> None:
    """The handler retains; a person releases it with its stamp; the observer fails on the release."""
    release(server, stamped(server.annotations, handler_id))
    Fails.armed[handler_id] = 1
    await op.event()
    assert not server.finalized and server.records()[handler_id]["outcome"] == "retained"
    assert "deadline" in server.records()[handler_id]


# --- a retained sub-handler's release, retried ------------------------------------------------------



def retaining_parent(runs: list[str], **limit: Any) -> kopf.OperatorRegistry:
    """A deletion handler ``parent`` (with ``limit``) whose one sub-handler ``a`` retains."""
    async def parent(**_: Any) -> None:
        runs.append("parent")
        await kopf.execute(fns={"a": retaining(runs, "a")})

    registry = kopf.OperatorRegistry()
    kopf.on.delete(*RESOURCE, registry=registry, id="parent", **limit)(parent)
    return registry


def parent_operator(server: Server, runs: list[str]) -> Operator:
    """A deletion handler whose sub-handlers are ``a`` (retains) and ``c`` (waits for a callback)."""
    def waiting(**_: Any) -> Outcome:
        runs.append("c")
        return Pending("waiting for the callback")

    async def parent(**_: Any) -> None:
        runs.append("parent")
        await kopf.execute(fns={"a": retaining(runs, "a"), "c": waiting})

    registry = kopf.OperatorRegistry()
    kopf.on.delete(*RESOURCE, registry=registry, id="parent")(parent)
    return Operator(server, registry)


async def test_a_sub_handlers_release_retried_stays_scheduled_when_the_parent_runs_meanwhile(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[str] = []
    op = parent_operator(server, runs)
    for _ in range(2):
        await op.event()
    await retained_and_release_failed(server, op, "parent/a")
    waits = told_waits(monkeypatch)
    server.body["spec"] = {"v": 2}  # wakes the parent and its pending child, not the retained one
    await op.event()
    await op.event()
    assert not server.finalized and runs.count("a") == 1
    assert due_within(waits, 61), ("no wait told for the release's retry", waits, server.records())
    op.restart()
    await op.event()  # the listing of a new process: the memory is all it has
    assert due_within(waits, 61), ("not re-armed after a restart", waits, server.records())


async def test_a_top_level_release_retried_stays_scheduled_when_another_handler_runs_meanwhile(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guard (held): the same as a top-level handler beside a pending one."""
    runs: list[str] = []

    def waiting(**_: Any) -> Outcome:
        runs.append("c")
        return Pending("waiting for the callback")

    op = deletion_operator(server, retaining(runs, "a"), waiting)
    await op.event()
    await retained_and_release_failed(server, op)
    waits = told_waits(monkeypatch)
    server.body["spec"] = {"v": 2}
    await op.event()
    assert runs == ["a", "c", "c"] and due_within(waits, 61), waits
    op.restart()
    await op.event()
    assert due_within(waits, 61), waits
    server.age(61)
    await op.event()
    assert "h0" not in server.records() and runs.count("a") == 1


# --- the observer failing on every retry; a restart; two retentions -----------------------------------

async def test_an_observer_failing_on_every_retry_costs_one_write_per_delay_and_never_runs_the_handler(
        server: Server) -> None:
    runs: list[str] = []
    op = deletion_operator(server, retaining(runs, "a"))
    await op.event()
    release(server, stamped(server.annotations, "h0"))
    Fails.armed["h0"] = 1000
    for _ in range(5):
        await op.event()
        sent = len(server.sent)
        for _ in range(3):  # events before the deadline (its own write's, others'): nothing written
            await op.event()
        assert len(server.sent) == sent, server.sent[sent:]
        server.age(61)
    assert runs == ["a"] and not server.finalized and server.records()["h0"]["outcome"] == "retained"
    assert server.annotations[DEFAULT_KEYS.release] == stamped(server.annotations, "h0")
    Fails.armed["h0"] = 0
    await op.event()
    assert server.finalized and runs == ["a"]


async def test_a_release_retried_after_a_restart_waits_for_its_deadline_read_from_the_memory(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[str] = []
    op = deletion_operator(server, retaining(runs, "a"))
    await op.event()
    await retained_and_release_failed(server, op)
    op.restart()  # or another replica: only the object knows
    unrecorded._final.clear()
    waits = told_waits(monkeypatch)
    await op.event()
    assert not server.finalized and due_within(waits, 61), waits
    server.age(61)
    await op.event()
    assert server.finalized and runs == ["a"]


@pytest.mark.parametrize("lifecycle", [kopf.lifecycles.all_at_once, kopf.lifecycles.one_by_one])
@pytest.mark.parametrize("failing", ["h0", "h1"])
async def test_of_two_retentions_released_at_once_the_one_an_observer_failed_on_is_retried_alone(
        server: Server, lifecycle: Any, failing: str) -> None:
    runs: list[str] = []
    op = deletion_operator(server, retaining(runs, "a"), retaining(runs, "b"), lifecycle=lifecycle)
    for _ in range(3):
        await op.event()
    assert {record["outcome"] for record in server.records().values()} == {"retained"}
    release(server, stamped(server.annotations, "h0", "h1"))
    Fails.armed[failing] = 1
    for _ in range(4):
        await op.event()
    assert not server.finalized and server.records()[failing]["outcome"] == "retained"
    assert DEFAULT_KEYS.release in server.annotations  # it still answers the one retried
    for _ in range(3):
        server.age(61)
        await op.event()
    assert server.finalized and sorted(runs) == ["a", "b"]


@pytest.mark.parametrize("change", ["*", "another's stamp", "bare name", "removed"])
async def test_a_release_retried_whose_annotation_changed_to_one_that_does_not_answer_it_stays_retained(
        server: Server, change: str) -> None:
    runs: list[str] = []
    op = deletion_operator(server, retaining(runs, "a"), retaining(runs, "b"))
    await op.event()
    stamp0, stamp1 = server.records()["h0"]["stamp"], server.records()["h1"]["stamp"]
    await retained_and_release_failed(server, op)
    value = {"*": "*", "another's stamp": f"h1@{stamp1}", "bare name": "h0", "removed": None}[change]
    if value is None:
        del server.annotations[DEFAULT_KEYS.release]
    else:
        release(server, value)
    for _ in range(3):
        server.age(61)
        await op.event()
    record = server.records()["h0"]
    assert not server.finalized and sorted(runs) == ["a", "b"]
    assert (record["outcome"], record["stamp"], "deadline" in record) == ("retained", stamp0, False)
    sent = len(server.sent)
    for _ in range(3):  # the deadline dropped: no busy loop
        server.age(61)
        await op.event()
    assert len(server.sent) == sent, server.sent[sent:]


# --- a retained record's deadline, forged or from another replica ----------------------------------

def set_deadline(server: Server, handler_id: str, deadline: str) -> None:
    records = server.records()
    records[handler_id] = {**records[handler_id], "deadline": deadline}
    server.annotations[DEFAULT_KEYS.memory] = json.dumps(records)


@pytest.mark.parametrize("deadline", ["2000-01-01T00:00:00+00:00", "2000-01-01T00:00:00", "soon", ""])
@pytest.mark.parametrize("released", [True, False], ids=["released", "not-released"])
async def test_a_retained_records_past_or_garbage_deadline_neither_releases_nor_loops(
        server: Server, deadline: str, released: bool) -> None:
    runs: list[str] = []
    op = deletion_operator(server, retaining(runs, "a"))
    await op.event()
    set_deadline(server, "h0", deadline)
    if released:
        release(server, stamped(server.annotations, "h0"))
    for _ in range(2):
        await op.event()
    assert runs == ["a"] and server.finalized == released
    if not released:
        sent = len(server.sent)
        for _ in range(3):
            await op.event()
        assert len(server.sent) == sent, server.sent[sent:]


async def test_a_release_held_by_a_retained_records_deadline_far_ahead_says_why(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    runs: list[str] = []
    op = deletion_operator(server, retaining(runs, "a"))
    await op.event()
    set_deadline(server, "h0", "9999-12-31T23:59:59+00:00")
    release(server, stamped(server.annotations, "h0"))
    caplog.clear()
    for _ in range(2):
        await op.event()
    assert runs == ["a"]
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert server.finalized or any("9999" in message or "release" in message for message in said), said


async def test_a_retained_handler_under_a_time_based_escalation_is_released_at_its_retry_and_never_runs(
        server: Server, tmp_path: Any) -> None:
    """The deadline of a retained record is its release's retry, never an escalation's."""
    policy = tmp_path / "policy.toml"
    policy.write_text('fatal_on_delete = "retain"\n\n[[escalate]]\nafter_seconds = 60\noutcome = "fatal"\n')
    kopf_outcomes.install(entry_points=False, events=False, policy=policy, plugins=[Fails()])
    runs: list[str] = []

    def waiting(**_: Any) -> Outcome:
        runs.append("p")
        return Pending("waiting for the callback")

    op = deletion_operator(server, waiting)
    await op.event()
    server.age(61)
    await op.event()  # escalated: retained
    assert server.records()["h0"]["outcome"] == "retained" and runs == ["p", "p"]
    await retained_and_release_failed(server, op)
    for _ in range(3):
        await op.event()
    for _ in range(3):
        server.age(61)
        await op.event()
    assert server.finalized and runs == ["p", "p"]


# --- the observers told after the memory write ----------------------------------------------------

async def test_a_release_an_observer_failed_on_leaves_the_condition_saying_the_finalizer_is_retained(
        server: Server) -> None:
    import kopf_outcomes_conditions
    kopf_outcomes.install(entry_points=False, events=False, plugins=[Fails(), kopf_outcomes_conditions])
    runs: list[str] = []
    op = deletion_operator(server, retaining(runs, "a"))
    await op.event()
    await retained_and_release_failed(server, op)
    await op.event()
    reasons = {c["type"]: c["reason"] for c in server.body["status"]["conditions"]}
    assert reasons["H0Succeeded"] == "FinalizerRetained", reasons


@pytest.mark.parametrize("concludes", ["pending", "success", "retain"])
async def test_an_observer_failing_on_a_conclusion_leaves_the_retrys_record_alone(
        server: Server, concludes: str) -> None:
    """The conclusion's record, written first, is replaced by the Retry's: no stamp, no pending wait,
    the finalizer kept; the retry concludes as the handler says."""
    runs: list[str] = []

    def fn(**_: Any) -> Outcome:
        runs.append(concludes)
        return {"pending": Pending("waiting"), "success": Success(),
                "retain": Fatal("refused", on_delete="retain")}[concludes]

    op = deletion_operator(server, fn)
    Fails.armed["h0"] = 1
    await op.event()
    record = server.records().get("h0")
    assert not server.finalized
    assert record is None or (record["outcome"], "stamp" in record) == ("retry", False), record
    server.age(61)
    await op.event()
    assert len(runs) == 2
    assert server.finalized == (concludes == "success")

async def test_a_sub_handlers_release_retried_then_withdrawn_stays_retained_with_no_loop(server: Server) -> None:
    """Guard (held): the parent runs at the child's deadline once; the child stays retained, neither
    record keeps a deadline, and nothing is written after."""
    runs: list[str] = []
    op = parent_operator(server, runs)
    for _ in range(2):
        await op.event()
    await retained_and_release_failed(server, op, "parent/a")
    await op.event()
    del server.annotations[DEFAULT_KEYS.release]
    for _ in range(3):
        server.age(61)
        await op.event()
    sent = len(server.sent)
    for _ in range(3):
        server.age(61)
        await op.event()
    assert len(server.sent) == sent, server.sent[sent:]
    assert runs.count("a") == 1 and not server.finalized
    assert "deadline" not in server.records()["parent/a"] and "deadline" not in server.records()["parent"]



@pytest.mark.parametrize("limit", [{"retries": 2}, {"timeout": 30}], ids=["retries", "timeout"])
async def test_a_parent_with_limits_keeps_the_finalizer_while_its_childs_release_is_retried(
        server: Server, limit: dict[str, Any]) -> None:
    runs: list[str] = []

    op = Operator(server, retaining_parent(runs, **limit))
    for _ in range(2):
        await op.event()
    release(server, stamped(server.annotations, "parent/a"))
    Fails.armed["parent/a"] = 1000  # the metrics backend stays down
    for _ in range(4):
        await op.event()
        await op.event()
        server.age(61)
    told = [outcome for handler_id, outcome in Fails.told if handler_id == "parent/a"]
    assert not server.finalized, ("released while the observer fails on the child's release", told,
                                  server.records())


@pytest.mark.parametrize("limit", [{"retries": 2}, {"timeout": 30}], ids=["retries", "timeout"])
async def test_a_childs_release_retried_spends_none_of_its_parents_limits_and_releases_once_told(
        server: Server, limit: dict[str, Any]) -> None:
    """The parent's runs for its child's release retried are holds: its retries=/timeout= never end
    it (it is never retained for itself); once the observer is back, the child's release is told
    and the finalizer goes."""
    runs: list[str] = []

    op = Operator(server, retaining_parent(runs, **limit))
    for _ in range(2):
        await op.event()
    release(server, stamped(server.annotations, "parent/a"))
    Fails.armed["parent/a"] = 4
    for _ in range(5):
        await op.event()
        assert server.finalized or server.records()["parent"]["outcome"] == "pending", server.records()
        server.age(61)
    await op.event()
    assert server.finalized and runs.count("a") == 1
    assert Fails.told[-1] == ("parent/a", "Fatal") or ("parent/a", "Fatal") in Fails.told[-2:], Fails.told


async def test_a_parent_ended_by_its_timeout_before_its_childs_release_concludes_the_childs_release_first(
        server: Server) -> None:
    """A person releases the child after the parent's timeout=: the parent ends for good and is retained
    for the child; its release through the child concludes the child's, retried while the observer fails."""
    runs: list[str] = []

    op = Operator(server, retaining_parent(runs, timeout=30))
    for _ in range(2):
        await op.event()
    server.age(61)
    release(server, stamped(server.annotations, "parent/a"))
    Fails.armed["parent/a"] = 3
    for _ in range(3):
        await op.event()
        await op.event()
        assert server.finalized or server.records()["parent/a"]["outcome"] == "retained", server.records()
        server.age(61)
    assert not server.finalized and Fails.armed["parent/a"] == 0, server.records()
    for _ in range(3):
        await op.event()
        server.age(61)
    assert server.finalized and runs.count("a") == 1 and Fails.armed["parent/a"] == 0
    assert ("parent/a", "Fatal") in Fails.told, Fails.told


async def test_a_release_held_by_its_retry_says_so_once_and_a_deadline_past_any_retry_is_ignored_at_error(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    """A deadline within a retry's reach holds the release, said once with the deadline; one beyond
    it is garbage: the release is attempted now (what the person asked for), said at ERROR."""
    import datetime
    runs: list[str] = []
    op = deletion_operator(server, retaining(runs, "a"))
    await op.event()
    soon = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)).isoformat()
    set_deadline(server, "h0", soon)
    release(server, stamped(server.annotations, "h0"))
    caplog.clear()
    for _ in range(3):
        await op.event()
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and soon in r.getMessage()]
    assert not server.finalized and len(said) == 1 and "'h0'" in said[0], said
    set_deadline(server, "h0", "9999-12-31T23:59:59+00:00")
    caplog.clear()
    await op.event()
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR and "9999" in r.getMessage()]
    assert server.finalized and runs == ["a"] and len(errors) == 1 and "'h0'" in errors[0], errors
