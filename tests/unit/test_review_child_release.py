"""
Attempts to break a person's release through a retained sub-handler (``releases.released``: the
child released on its parent's behalf leaves the annotation to the parent's release, whose record
keeps ``released_by`` while its release is retried; a parent stays retained while another of its
sub-handlers retains), each through Kopf's real processing of one object (:mod:`.one_object`).
"""
from __future__ import annotations

import json
from typing import Any

import kopf
import pytest

from kopf_outcomes import Fatal, Retry
from kopf_outcomes._kopf import retentions, unrecorded
from kopf_outcomes.memory import DEFAULT_KEYS
from tests.unit.observed_process import installed
from tests.unit.one_object import Operator, Server, server
from tests.unit.releases import stamped
from tests.unit.test_review_break7 import due_within
from tests.unit.test_review_restructure import (
    Observer,
    Trace,
    deletion_operator,
    events,
    parent_with_a_retaining_child,
    parent_with_two_retaining_children,
    parents_release_retried,
    returning,
    told,
)
from tests.unit.test_review_wave5 import told_waits

__all__ = ["installed", "server"]


def retaining(runs: list[str], name: str) -> Any:
    return returning(runs, name, lambda: Fatal("refused", on_delete="retain"))


def forge(server: Server, handler_id: str, **fields: Any) -> None:
    """A hand-written change to one record of the object's memory."""
    records = server.records()
    records[handler_id].update(fields)
    server.annotations[DEFAULT_KEYS.memory] = json.dumps(records, sort_keys=True, separators=(",", ":"))


def outcomes(server: Server) -> dict[str, str]:
    return {handler_id: record["outcome"] for handler_id, record in server.records().items()}


# --- a forged released_by -------------------------------------------------------------------------


@pytest.mark.parametrize("forged", ["another-handler", "a-non-child", "unstamped-and-star"])
async def test_a_forged_released_by_releases_nothing_the_person_did_not_release(
        server: Server, caplog: pytest.LogCaptureFixture, forged: str) -> None:
    """``h0`` retained (no sub-handlers); its record forged to say it was released by another
    retention's entry (``h1``'s; ``p/a``'s, a sub-handler of another parent; or ``h1`` unstamped).
    The person releases that other one only (``*`` for the unstamped): ``h0`` stays retained."""
    trace = Trace(f"forged-released-by-{forged}", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"h0": retaining(runs, "h0"), "h1": retaining(runs, "h1"),
                                    "p": parent_with_a_retaining_child(runs)}, retries=2)
    await events(op, server, trace, 6, aged=3600)
    assert outcomes(server) == {"h0": "retained", "h1": "retained", "p": "retained", "p/a": "retained"}
    release = {"another-handler": stamped(server.annotations, "h1"), "a-non-child": stamped(server.annotations, "p/a"),
               "unstamped-and-star": "*"}[forged]
    forge(server, "h0", released_by="h1" if forged == "unstamped-and-star" else release)
    server.annotations[DEFAULT_KEYS.release] = release
    await events(op, server, trace, 3, aged=3600)
    assert not server.finalized and server.records()["h0"]["outcome"] == "retained", trace.steps[-3:]
    assert "Fatal" not in told(trace, "h0")[1:], trace.steps[-3:]  # told once: as it was retained


@pytest.mark.parametrize("field", ["released_by", "stamp"])
@pytest.mark.parametrize("forged", [5, ["p/a"]])
async def test_a_released_by_of_a_wrong_type_releases_nothing(
        server: Server, caplog: pytest.LogCaptureFixture, forged: object, field: str) -> None:
    """A ``released_by`` that is no string (or a ``stamp``, for comparison) makes the memory unreadable:
    read as none, per docs/memory.md; the child still retains, and nothing may be released, though
    the child's release is there."""
    trace = Trace("forged-released-by-type", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"p": parent_with_a_retaining_child(runs)}, retries=2)
    await events(op, server, trace, 6, aged=3600)
    release = stamped(server.annotations, "p/a")
    forge(server, "p", **{field: forged})
    server.annotations[DEFAULT_KEYS.release] = release
    await events(op, server, trace, 4, aged=3600)
    assert not server.finalized, trace.steps[-4:]
    assert any("WARNING" == level and "memory" in message.lower() for step in trace.steps[-4:]
               for level, message in step["logs"]), trace.steps[-4:]


# --- two parents, one annotation --------------------------------------------------------------------

@pytest.mark.parametrize("lifecycle", ["all_at_once", "asap"])
@pytest.mark.parametrize("fails_on", [None, "p1", "p2", "p1/a"])
async def test_two_parents_released_through_their_children_by_one_annotation(
        server: Server, caplog: pytest.LogCaptureFixture, fails_on: str | None, lifecycle: str) -> None:
    """``p1`` and ``p2`` each retained for its retained child; one annotation carries both children's
    entries. Both go (after the retry of the one an observer failed on), each told once, nothing runs
    again, and the annotation goes with the last release told, not before."""
    trace = Trace(f"two-parents-{fails_on}-{lifecycle}", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"p1": parent_with_a_retaining_child(runs),
                                    "p2": parent_with_a_retaining_child(runs)}, retries=2)
    op.lifecycle = getattr(kopf.lifecycles, lifecycle)
    await events(op, server, trace, 12, aged=3600)
    assert outcomes(server) == {"p1": "retained", "p1/a": "retained", "p2": "retained", "p2/a": "retained"}
    ran = len(runs)
    release = stamped(server.annotations, "p1/a", "p2/a")
    server.annotations[DEFAULT_KEYS.release] = release
    if fails_on:
        Observer.armed[fails_on] = 1
    server.age(1)
    await events(op, server, trace)
    if fails_on:
        assert not server.finalized, trace.steps[-1]
        assert server.annotations.get(DEFAULT_KEYS.release) == release, trace.steps[-1]
        await events(op, server, trace)  # not yet due: nothing is told again
        assert not server.finalized and server.annotations.get(DEFAULT_KEYS.release) == release
    server.age(3600)
    await events(op, server, trace, 3)
    trace.dump()
    assert server.finalized and len(runs) == ran, (runs[ran:], trace.steps[-3:])
    for handler_id in ("p1", "p1/a", "p2", "p2/a"):  # retained, (failed,) released
        expected = ["Fatal"] * (3 if handler_id == fails_on else 2)
        assert told(trace, handler_id) == expected, (handler_id, trace.steps)


# --- a restart while the parent's release waits for its retry --------------------------------------

async def test_a_restart_keeps_the_parents_retried_release_through_its_child(
        server: Server, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's memory lost between the child's release and the parent's retried one: the
    finalizer stays, the retry is scheduled again from the object, and the release comes with it."""
    trace = Trace("release-through-child-restart", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"parent": parent_with_a_retaining_child(runs)}, retries=2)
    waits = told_waits(monkeypatch)
    release = await parents_release_retried(op, server, trace, failures=1)
    assert due_within(waits, 61), waits
    op.restart()
    unrecorded._final.clear()
    retentions._SAID.clear()
    await events(op, server, trace, 2)  # the new process's listing, before the retry is due
    assert not server.finalized and server.annotations.get(DEFAULT_KEYS.release) == release, trace.steps[-2:]
    assert due_within(waits, 61), ("not re-armed after the restart", waits)
    assert server.records()["parent"]["released_by"] == release
    assert told(trace, "parent") == ["Fatal", "Fatal"], trace.steps  # retained, failed; nothing more yet
    server.age(3600)
    await events(op, server, trace, 2)
    trace.dump()
    assert server.finalized and runs.count("a") == 1, trace.steps[-2:]
    assert DEFAULT_KEYS.release not in server.annotations
    assert told(trace, "parent") == ["Fatal"] * 3 and told(trace, "parent/a") == ["Fatal"] * 2, trace.steps


# --- the parent's observer failing for good ---------------------------------------------------------

async def test_a_parents_observer_failing_for_good_keeps_the_finalizer_without_a_loop(
        server: Server, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each retry of the parent's release is one attempt at its deadline (scheduled, not sooner):
    the finalizer, the annotation and ``released_by`` stay; the child is not told again."""
    trace = Trace("release-through-child-fails-for-good", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"parent": parent_with_a_retaining_child(runs)}, retries=2)
    waits = told_waits(monkeypatch)
    release = await parents_release_retried(op, server, trace, failures=10_000)
    for _ in range(3):
        before = len(told(trace, "parent"))
        await events(op, server, trace, 3)  # not due: told nothing, wrote nothing
        assert len(told(trace, "parent")) == before, trace.steps[-3:]
        sent = len(server.sent)
        await events(op, server, trace, 2)
        assert server.sent[sent:] == [], server.sent[sent:]
        server.age(3600)
        await events(op, server, trace)  # due: one attempt, failed again
        assert len(told(trace, "parent")) == before + 1, trace.steps[-1]
        assert due_within(waits, 61), waits
        assert not server.finalized and server.annotations.get(DEFAULT_KEYS.release) == release
        assert server.records()["parent"]["released_by"] == release
    assert told(trace, "parent/a") == ["Fatal", "Fatal"] and runs.count("a") == 1


# --- a retained middle sub-handler under a parent that waits with it --------------------------------

def waiting_parent_with_a_retained_middle(runs: list[str]) -> Any:
    """``parent`` (no retries=: it waits with its sub-handlers) whose ``x`` (retries=1) runs ``y``
    (retains) and ``z`` (retries): ``x``'s retries run out, so it is retained for ``y``."""
    async def middle(**_: Any) -> None:
        runs.append("x")
        await kopf.execute(fns={"y": retaining(runs, "y"),
                                "z": returning(runs, "z", lambda: kopf.TemporaryError("later", delay=1))})

    async def parent(**_: Any) -> None:
        runs.append("parent")
        kopf.subhandler(id="x", retries=1)(middle)
    return parent


@pytest.mark.parametrize("x_fails, retries", [(False, 3), (True, None), (True, 3)])
async def test_a_retained_middle_released_through_its_child_under_a_waiting_parent(
        server: Server, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, x_fails: bool,
        retries: int | None) -> None:
    """The release of ``parent/x/y`` releases ``x`` through it (``x`` is retained for it); where an
    observer fails on ``x``'s release, its retry (``released_by``) comes, and nothing runs again
    (with the parent's ``retries=`` unlimited, Kopf runs the parent at the retry: a guard)."""
    trace = Trace(f"middle-under-waiting-parent-{x_fails}-{retries}", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"parent": waiting_parent_with_a_retained_middle(runs)}, retries=retries)
    await events(op, server, trace, 8, aged=3600)
    assert outcomes(server).get("parent/x") == "retained" and outcomes(server).get("parent/x/y") == "retained"
    ran = len(runs)
    release = stamped(server.annotations, "parent/x/y")
    server.annotations[DEFAULT_KEYS.release] = release
    Observer.armed["parent/x"] = 1 if x_fails else 0
    waits = told_waits(monkeypatch)
    server.age(1)
    await events(op, server, trace)
    if x_fails:
        assert not server.finalized and server.records()["parent/x"].get("released_by") == release
        assert due_within(waits, 61), ("the retry of x's release is not scheduled", waits)
    await events(op, server, trace, 6, aged=3600)
    trace.dump()
    assert server.finalized and set(runs[ran:]) <= {"parent"}, (runs[ran:], trace.steps[-6:])
    assert DEFAULT_KEYS.release not in server.annotations
    assert told(trace, "parent/x").count("Fatal") == (3 if x_fails else 2), trace.steps


# --- a parent with two retained children --------------------------------------------------------

async def test_a_parent_left_retained_by_another_child_is_told_nothing_and_rests(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    """The release of ``a`` leaves the parent retained for ``c``: the parent's observers are told
    nothing of it, later events write and say nothing, and the parent is told once as ``c`` goes."""
    trace = Trace("two-children-rest", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"parent": parent_with_two_retaining_children(runs)}, retries=2)
    await events(op, server, trace, 6, aged=3600)
    assert told(trace, "parent") == ["Fatal"]
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "parent/a")
    server.age(1)
    await events(op, server, trace)
    assert told(trace, "parent") == ["Fatal"] and told(trace, "parent/a") == ["Fatal", "Fatal"]
    assert DEFAULT_KEYS.release not in server.annotations
    sent = len(server.sent)
    await events(op, server, trace, 3, aged=3600)
    assert server.sent[sent:] == [] and all(not step["logs"] and not step["told"] for step in trace.steps[-3:]), \
        trace.steps[-3:]
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "parent/c")
    await events(op, server, trace, 2)
    assert server.finalized and told(trace, "parent") == ["Fatal", "Fatal"], trace.steps[-2:]


# --- "*" and the unstamped forms ----------------------------------------------------------------

async def test_star_releases_no_stamped_retention_through_a_child(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    trace = Trace("star-through-child", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"parent": parent_with_a_retaining_child(runs)}, retries=2)
    await events(op, server, trace, 6, aged=3600)
    value = stamped(server.annotations, "parent/a")
    server.annotations[DEFAULT_KEYS.release] = "*"
    server.age(1)
    await events(op, server, trace, 3, aged=3600)
    assert not server.finalized and outcomes(server) == {"parent": "retained", "parent/a": "retained"}
    assert "released_by" not in server.records()["parent"]
    assert value not in str(trace.steps[-3:])  # the child's value is not said: the parent's is
    assert any(level == "ERROR" and "does not release Handler 'parent'" in message
               for step in trace.steps[-3:] for level, message in step["logs"]), trace.steps[-3:]


async def test_star_releases_an_unstamped_retention_through_a_child_across_a_failed_observer(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    """Retentions recorded without a stamp (by a version before stamps) are answered by ``*``, as
    documented; the parent's release, retried, stands while ``*`` does (``released_by`` unstamped),
    and goes with the annotation once told."""
    trace = Trace("star-unstamped-through-child", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"parent": parent_with_a_retaining_child(runs)}, retries=2)
    await events(op, server, trace, 6, aged=3600)
    records = server.records()
    records["parent/a"].pop("stamp")  # the child's retention is an old version's; the parent's is stamped
    server.annotations[DEFAULT_KEYS.memory] = json.dumps(records)
    server.annotations[DEFAULT_KEYS.release] = "*"
    Observer.armed["parent"] = 1
    server.age(1)
    await events(op, server, trace)
    assert not server.finalized and server.records()["parent"].get("released_by") == "parent/a", trace.steps[-1]
    assert server.annotations.get(DEFAULT_KEYS.release) == "*"
    server.age(3600)
    await events(op, server, trace, 2)
    assert server.finalized and runs.count("a") == 1, trace.steps[-2:]
    assert told(trace, "parent") == ["Fatal"] * 3 and told(trace, "parent/a") == ["Fatal"] * 2, trace.steps


async def test_a_forged_released_by_on_a_parent_whose_child_still_retains_releases_nothing(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    """Guard: the forged entry is another handler's, released by the person; the parent's child
    still retains, so the parent stays retained (the forged field is ignored)."""
    trace = Trace("forged-released-by-child-retains", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"p": parent_with_a_retaining_child(runs), "h1": retaining(runs, "h1")},
                           retries=2)
    await events(op, server, trace, 6, aged=3600)
    release = stamped(server.annotations, "h1")
    forge(server, "p", released_by=release)
    server.annotations[DEFAULT_KEYS.release] = release
    await events(op, server, trace, 3, aged=3600)
    assert "h1" not in server.records() and not server.finalized, trace.steps[-3:]
    assert outcomes(server) == {"p": "retained", "p/a": "retained"}
    assert told(trace, "p") == ["Fatal"]





@pytest.mark.parametrize("release", ["own-stamp", "star-unstamped"])
async def test_a_parent_released_by_its_own_release_while_its_child_retains(
        server: Server, caplog: pytest.LogCaptureFixture, release: str) -> None:
    """The parent retained for ``parent/a`` is released by its own release (its stamp, as its ERROR
    says; or ``*`` where both retentions are unstamped): nothing runs again, the child's retention is
    not left behind its parent's, and no release goes without its observers told."""
    trace = Trace(f"parent-own-release-{release}", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"parent": parent_with_a_retaining_child(runs)}, retries=2)
    await events(op, server, trace, 6, aged=3600)
    if release == "own-stamp":
        server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "parent")
    else:
        records = server.records()
        for record in records.values():
            record.pop("stamp", None)
        server.annotations[DEFAULT_KEYS.memory] = json.dumps(records)
        server.annotations[DEFAULT_KEYS.release] = "*"
    server.age(1)
    await events(op, server, trace, 3, aged=3600)
    assert runs.count("a") == 1, (runs, trace.steps[-3:])
    if not server.finalized:  # the parent stays retained for its child (or goes with it): the child's release
        server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "parent/a")
        await events(op, server, trace, 3, aged=3600)
    trace.dump()
    assert server.finalized and runs.count("a") == 1, (runs, trace.steps[-3:])
    assert told(trace, "parent/a") == ["Fatal", "Fatal"] and told(trace, "parent") == ["Fatal", "Fatal"], trace.steps


@pytest.mark.parametrize("fails_on", ["parent/a", "parent"])
async def test_a_parents_own_release_waits_for_its_childs_release_retried(
        server: Server, caplog: pytest.LogCaptureFixture, fails_on: str) -> None:
    """The parent's own release releases the sub-handler it is retained for with it; where an
    observer fails on one of the two, both wait for the retry, nothing runs again, the annotation
    stays until the parent's release is told, and each release is told once it succeeds."""
    trace = Trace(f"parent-own-release-retried-{fails_on.replace('/', '-')}", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"parent": parent_with_a_retaining_child(runs)}, retries=2)
    await events(op, server, trace, 6, aged=3600)
    release = stamped(server.annotations, "parent")
    server.annotations[DEFAULT_KEYS.release] = release
    Observer.armed[fails_on] = 1
    server.age(1)
    await events(op, server, trace)
    assert not server.finalized and server.annotations.get(DEFAULT_KEYS.release) == release, trace.steps[-1]
    server.age(3600)
    await events(op, server, trace, 2)
    assert server.finalized and runs.count("a") == 1 and runs.count("parent") <= 3, (runs, trace.steps[-2:])
    assert told(trace, fails_on) == ["Fatal"] * 3, trace.steps  # retained, the failed release, the release


# --- a leftover while the parent's release waits for its retry -------------------------------------

async def test_a_leftover_for_a_handler_retained_while_the_parents_release_waits(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    """The annotation (the child's entry, and ``h2`` by name) stays for the parent's retried release;
    ``h2`` is retained meanwhile: the annotation names it, so it is a leftover for ``h2`` (WARNING),
    releases nothing of it, and goes as the parent's release is told; ``h2`` waits for its own."""
    trace = Trace("leftover-while-parent-retried", caplog)
    runs: list[str] = []
    retains: list[bool] = []
    h2 = returning(runs, "h2", lambda: Fatal("refused", on_delete="retain") if retains else Retry("not yet", delay=1))
    registry = kopf.OperatorRegistry()  # the parent retained as its retries= run out; h2 retries on
    kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, id="parent", retries=2)(
        parent_with_a_retaining_child(runs))
    kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, id="h2", retries=100)(h2)
    op = Operator(server, registry)
    await events(op, server, trace, 6, aged=3600)
    assert server.records()["parent"]["outcome"] == "retained" and outcomes(server).get("h2") != "retained", \
        outcomes(server)
    value = f"{stamped(server.annotations, 'parent/a')},h2"
    server.annotations[DEFAULT_KEYS.release] = value
    Observer.armed["parent"] = 1
    server.age(1)
    await events(op, server, trace)
    assert server.records()["parent"].get("released_by"), trace.steps[-1]
    retains.append(True)
    server.age(5)  # h2's retry is due, the parent's release's retry is not
    await events(op, server, trace)
    assert server.records()["h2"]["outcome"] == "retained", trace.steps[-1]
    assert server.annotations.get(DEFAULT_KEYS.release) == value
    assert any(level == "WARNING" and "Ignored the release annotation" in message and "'h2'" in message
               for level, message in trace.steps[-1]["logs"]), trace.steps[-1]
    server.age(3600)
    await events(op, server, trace, 2)
    assert "parent" not in server.records() and server.records()["h2"]["outcome"] == "retained", trace.steps[-2:]
    assert not server.finalized and DEFAULT_KEYS.release not in server.annotations, trace.steps[-2:]
    assert "ignored_release" not in server.records()["h2"] and told(trace, "h2").count("Fatal") == 1
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "h2")
    await events(op, server, trace, 2)
    trace.dump()
    assert server.finalized and runs.count("a") == 1 and told(trace, "h2").count("Fatal") == 2, trace.steps[-2:]
