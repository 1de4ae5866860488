"""
Attempts to break today's changes through Kopf's real processing of one object (:mod:`.one_object`):
stamped releases (a release answers the retention whose stamp it carries, and only it), the re-run
of a parked handler this process concluded for good (:mod:`kopf_outcomes._kopf.unrecorded`), and
the wait for a toggle set with one waiter (:mod:`kopf_outcomes._kopf.readiness`).
"""

from __future__ import annotations

import asyncio
import collections
import json
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import kopf
import pytest
from kopf._cogs.clients import watching

import kopf_outcomes
from kopf_outcomes import Fatal, Outcome, Pending
from kopf_outcomes._kopf import delays, readiness, requeue, selection, unrecorded
from kopf_outcomes.memory import DEFAULT_KEYS
from tests.unit.kopf_objects import aiotoggles, references
from tests.unit.one_object import RELEASES_BEFORE_THE_MEMORY, Operator, Server, server
from tests.unit.releases import stamped
from tests.unit.test_review_wakeups import ScriptedApi, body

__all__ = ["server"]

RESOURCE = ("kopf.dev", "v1", "kopfexamples")


@pytest.fixture(autouse=True)
def installed(unpatched: None) -> Iterator[None]:
    kopf_outcomes.install(entry_points=False, events=False)
    unrecorded._final.clear()  # this process's conclusions: each test is a new process
    yield
    unrecorded._final.clear()


def retaining(runs: list[str], name: str) -> Callable[..., Outcome]:
    def fn(**_: Any) -> Outcome:
        runs.append(name)
        return Fatal("the external system refused", on_delete="retain")
    return fn


def deletion_operator(server: Server, *fns: Callable[..., Any], lifecycle: Any = None) -> Operator:
    registry = kopf.OperatorRegistry()
    for index, fn in enumerate(fns):
        kopf.on.delete(*RESOURCE, registry=registry, id=f"h{index}")(fn)
    op = Operator(server, registry)
    if lifecycle is not None:
        op.lifecycle = lifecycle
    return op


def release(server: Server, value: str) -> None:
    server.annotations[DEFAULT_KEYS.release] = value


# --- 1. stamped releases ------------------------------------------------------------------------

@pytest.mark.parametrize("lifecycle", [kopf.lifecycles.all_at_once, kopf.lifecycles.one_by_one])
async def test_two_retentions_are_released_only_by_their_own_stamps(server: Server, lifecycle: Any) -> None:
    """Two handlers retained: each stamp answers its own handler only (swapped, nothing goes); both
    named with their own stamps release both, and the object goes."""
    runs: list[str] = []
    op = deletion_operator(server, retaining(runs, "a"), retaining(runs, "b"), lifecycle=lifecycle)
    for _ in range(3):  # one_by_one retains one handler per cycle
        await op.event()
    records = server.records()
    assert {records["h0"]["outcome"], records["h1"]["outcome"]} == {"retained"}
    stamp0, stamp1 = records["h0"]["stamp"], records["h1"]["stamp"]
    assert stamp0 != stamp1
    release(server, f"h0@{stamp1},h1@{stamp0}")  # the right stamps for the wrong handlers
    for _ in range(2):
        await op.event()
    assert not server.finalized
    release(server, f"h0@{stamp1}")  # another handler's stamp alone
    await op.event()
    assert not server.finalized
    release(server, stamped(server.annotations, "h0", "h1"))
    for _ in range(3):
        await op.event()
    assert server.finalized and sorted(runs) == ["a", "b"]


async def test_a_release_of_one_of_two_retentions_keeps_the_other(server: Server) -> None:
    runs: list[str] = []
    op = deletion_operator(server, retaining(runs, "a"), retaining(runs, "b"))
    await op.event()
    stamp1 = server.records()["h1"]["stamp"]
    release(server, stamped(server.annotations, "h0"))
    for _ in range(2):
        await op.event()
    assert not server.finalized
    assert server.records()["h1"]["outcome"] == "retained" and server.records()["h1"]["stamp"] == stamp1
    assert DEFAULT_KEYS.release not in server.annotations  # consumed by the release of h0
    release(server, f"h1@{stamp1}")  # the stamp the log gave for h1 at its retention still answers it
    await op.event()
    assert server.finalized and sorted(runs) == ["a", "b"]


@pytest.mark.parametrize("value", ["h0@", "@{stamp}", "h0@{stamp}@{stamp}", "h0 @ {stamp}", "h0@{upper}",
                                   "*@{stamp}", "h0@*", "h0/x@{stamp}", "h0@{stamp}x", "h0@{prefix}"])
async def test_an_odd_stamp_releases_nothing(server: Server, value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "token_hex", lambda _: "abc123")  # a stamp with letters, every time
    runs: list[str] = []
    op = deletion_operator(server, retaining(runs, "a"))
    await op.event()
    stamp = server.records()["h0"]["stamp"]
    release(server, value.format(stamp=stamp, upper=stamp.upper(), prefix=stamp[:-1]))
    for _ in range(2):
        await op.event()
    assert not server.finalized and runs == ["a"]


async def test_a_stamped_release_with_spaces_and_other_entries_releases(server: Server) -> None:
    runs: list[str] = []
    op = deletion_operator(server, retaining(runs, "a"))
    await op.event()
    release(server, f" other@abc , h0@{server.records()['h0']['stamp']} ,*")
    await op.event()
    assert server.finalized and runs == ["a"]


async def test_a_released_retention_that_is_retained_again_has_a_new_stamp(server: Server) -> None:
    """A person removes the memory of a retained handler: it runs again and is retained afresh; the
    stamp of the first retention answers nothing of the second."""
    runs: list[str] = []
    op = deletion_operator(server, retaining(runs, "a"))
    await op.event()
    first = stamped(server.annotations, "h0")
    del server.annotations[DEFAULT_KEYS.memory]
    await op.event()  # its memory gone: Kopf's retained mark runs it to conclude afresh
    second = stamped(server.annotations, "h0")
    assert runs == ["a", "a"] and first != second
    release(server, first)
    for _ in range(2):
        await op.event()
    assert not server.finalized
    release(server, second)
    await op.event()
    assert server.finalized


async def test_a_stamp_survives_the_other_handlers_own_writes(server: Server) -> None:
    """Another handler writes the state in each cycle (its records re-digest): the retained record
    keeps the stamp its log gave, and that release still answers it. The retention goes; since the
    release's cycle writes into h0's state (h1's write), h0's record stays as a released Fatal's (no
    stamp, holding nothing), so that a kill before the finalizer's removal keeps its key
    (new-own-write-kill-fatal)."""
    runs: list[str] = []

    def writer(patch: kopf.Patch, **_: Any) -> Outcome:
        runs.append("w")
        patch.status["counter"] = len(runs)
        return Pending("waiting", recheck=60)

    op = deletion_operator(server, retaining(runs, "a"), writer)
    await op.event()
    stamp = server.records()["h0"]["stamp"]
    server.age(61)
    await op.event()
    server.age(61)
    await op.event()
    assert server.records()["h0"]["stamp"] == stamp
    release(server, f"h0@{stamp}")
    await op.event()
    released = server.records()["h0"]
    assert released["outcome"] == "fatal" and "stamp" not in released and not server.finalized  # h1 still waits
    assert DEFAULT_KEYS.release not in server.annotations  # consumed: it answered the retention


async def test_a_retained_record_edited_to_drop_its_stamp_is_released_by_its_name_alone(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    """Documented: a record without a stamp is one from before stamps, and its name (or ``*``) releases
    it. A person who edits the stamp out of the memory gets that form back (marked, not a defect)."""
    runs: list[str] = []
    op = deletion_operator(server, retaining(runs, "a"))
    await op.event()
    records = server.records()
    del records["h0"]["stamp"]
    server.annotations[DEFAULT_KEYS.memory] = json.dumps(records)
    release(server, "*")
    await op.event()
    assert server.finalized and runs == ["a"]


# --- 2. the re-run of a handler this process concluded for good (unrecorded.py) ------------------

def updating_operator(server: Server, fn: Callable[..., Any]) -> Operator:
    registry = kopf.OperatorRegistry()
    kopf.on.update(*RESOURCE, registry=registry, id="h")(fn)
    return Operator(server, registry)


def live(uid: str = "u1") -> dict[str, Any]:
    return {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "spec": {"v": 1},
            "metadata": {"name": "x", "namespace": "ns", "uid": uid, "resourceVersion": "1",
                         }}


async def process_elsewhere_then_here(server: Server, monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, str]]:
    """This process concludes the handler for good on a state (its write accepted); another process
    (a failover, a shard moved back and forth) runs it on a new state, where it parks; then this
    process is given the same object again, unchanged (a relist, or the next event of a write
    outside the handler's state)."""
    seen: list[tuple[bool, str]] = []

    def fn(spec: dict[str, Any], **_: Any) -> Outcome | None:
        memory = kopf_outcomes.recall()
        seen.append((memory.acted_on_this_state, memory.idempotency_key))
        return None if spec["v"] == 2 else Pending("waiting for the callback")

    server.body = live()
    here = updating_operator(server, fn)
    await here.event()  # the creation: nothing to run, Kopf stores the last-handled configuration
    assert "kopf.zalando.org/last-handled-configuration" in server.annotations
    server.body["spec"] = {"v": 2}
    await here.event()  # succeeds here: for good
    assert len(seen) == 1
    ours = unrecorded._final
    monkeypatch.setattr(unrecorded, "_final", collections.OrderedDict())  # the other process
    there = updating_operator(server, fn)
    server.body["spec"] = {"v": 3}
    await there.event()  # it parks there
    assert len(seen) == 2 and server.records()["h"]["outcome"] == "pending"
    monkeypatch.setattr(unrecorded, "_final", ours)  # back here, where it concluded for good before
    await here.event()  # the same object again
    return seen


async def test_a_handler_parked_by_another_process_is_not_run_again_by_an_old_conclusion_here(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing wakes a parked handler but a change; this process's conclusion was about another state."""
    seen = await process_elsewhere_then_here(server, monkeypatch)
    assert len(seen) == 2, f"run again on an unchanged state: {seen}"


async def test_a_parked_handler_run_again_by_an_old_conclusion_here_knows_it_acted(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guard (whether or not it runs again): a run on the state it acted on says so, with its key."""
    seen = await process_elsewhere_then_here(server, monkeypatch)
    assert all(acted and key == seen[1][1] for acted, key in seen[2:]), seen


# --- 3. readiness: the wait for a toggle set ---------------------------------------------------

async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_a_cancelled_leader_leaves_its_followers_waiting_until_the_state_holds() -> None:
    wait_for = aiotoggles.ToggleSet.wait_for  # installed: readiness's wait
    toggles = aiotoggles.ToggleSet(all)
    toggle = await toggles.make_toggle(False)
    leader = asyncio.create_task(wait_for(toggles, True))
    await settle()
    followers = [asyncio.create_task(wait_for(toggles, True)) for _ in range(3)]
    await settle()
    leader.cancel()
    await settle()
    assert leader.cancelled() and not any(task.done() for task in followers)
    followers[0].cancel()  # a follower cancelled too: the others still wait
    await settle()
    assert not any(task.done() for task in followers[1:])
    await toggle.turn_to(True)
    await asyncio.wait_for(asyncio.gather(*followers[1:]), timeout=5)
    assert followers[0].cancelled()


async def test_a_wait_for_on_and_off_at_once_each_return_when_their_state_holds() -> None:
    wait_for = aiotoggles.ToggleSet.wait_for  # installed: readiness's wait
    toggles = aiotoggles.ToggleSet(all)
    toggle = await toggles.make_toggle(False)
    on = [asyncio.create_task(wait_for(toggles, True)) for _ in range(2)]
    off = [asyncio.create_task(wait_for(toggles, False)) for _ in range(2)]
    await asyncio.wait_for(asyncio.gather(*off), timeout=5)  # it is off: they return at once
    assert not any(task.done() for task in on)
    await toggle.turn_to(True)
    await asyncio.wait_for(asyncio.gather(*on), timeout=5)
    off = [asyncio.create_task(wait_for(toggles, False)) for _ in range(2)]
    await settle()
    assert not any(task.done() for task in off)
    await toggles.drop_toggle(toggle)  # all() of nothing is True: still not off
    await settle()
    assert not any(task.done() for task in off)
    await toggles.make_toggle(False)  # a new toggle, off: the set is off
    await asyncio.wait_for(asyncio.gather(*off), timeout=5)


async def test_an_error_in_the_leaders_wait_is_its_own_and_the_followers_wait_on() -> None:
    calls: list[bool] = []

    async def failing_once(self: Any, state: bool) -> None:
        calls.append(state)
        if len(calls) == 1:
            await asyncio.sleep(0)
            raise RuntimeError("the condition broke")
        await aiotoggles.ToggleSet.wait_for(self, state)

    wait_for = readiness.wrap(failing_once)
    toggles = aiotoggles.ToggleSet(all)
    toggle = await toggles.make_toggle(False)
    leader = asyncio.ensure_future(wait_for(toggles, True))
    follower = asyncio.ensure_future(wait_for(toggles, True))
    await settle()
    assert isinstance(leader.exception(), RuntimeError)
    assert not follower.done()  # never earlier than the state holds
    await toggle.turn_to(True)
    await asyncio.wait_for(follower, timeout=5)
    assert calls == [True, True]


async def test_a_flip_back_before_the_followers_look_again_keeps_them_waiting() -> None:
    """The leader returns on the state; before its followers look again, the state flips back: as
    Kopf's waiters re-check under the condition, they wait on (never return earlier than Kopf's)."""
    wait_for = aiotoggles.ToggleSet.wait_for  # installed: readiness's wait
    toggles = aiotoggles.ToggleSet(all)
    toggle = await toggles.make_toggle(False)
    leader = asyncio.create_task(wait_for(toggles, True))
    await settle()
    followers = [asyncio.create_task(wait_for(toggles, True)) for _ in range(2)]
    await settle()
    await toggle.turn_to(True)
    await leader
    await toggle.turn_to(False)  # before the followers ran again
    await settle()
    assert not any(task.done() for task in followers)
    await toggle.turn_to(True)
    await asyncio.wait_for(asyncio.gather(*followers), timeout=5)


# --- 4. the relist bookkeeping (selection.Listings) ----------------------------------------------

async def test_an_object_recreated_with_its_name_while_the_watch_was_down_is_told_left_by_its_old_uid(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """x is deleted and re-created (a new uid) while the watch is down: the relist holds the new x
    and y, not the old x, which alone is told as left (its parents woken); a listing vouches for
    no uid but those it holds."""

    old, new = body("x"), body("x")
    new["metadata"]["uid"] = "u-x-again"
    told: list[selection.Unlisted] = []
    listings = selection.Listings(told.extend)
    token = requeue._listings.set(listings)
    try:
        api = ScriptedApi([([old, body("y")], False), ([new, body("y")], False)])
        settings = api.serve(monkeypatch)  # Kopf's own infinite_watch; its continuous_watch as installed
        resource = references.Resource("kopf.dev", "v1", "kopfexamples", namespaced=True)
        async for _ in watching.infinite_watch(settings=settings, resource=resource, namespace=None, _iterations=2):
            pass
    finally:
        requeue._listings.reset(token)
    assert [(gone.uid, gone.name) for gone in told] == [("u-x", "x")], told
    assert not listings.holds(old) and listings.holds(new) and listings.holds(body("y"))


# --- 5. the key kept across a Retry ----------------------------------------------------------------

def recalling(seen: list[tuple[bool, str]], then: Callable[[int, kopf.Patch], Outcome | None]) -> Callable[..., Any]:
    def fn(patch: kopf.Patch, **_: Any) -> Outcome | None:
        memory = kopf_outcomes.recall()
        seen.append((memory.acted_on_this_state, memory.idempotency_key))
        return then(len(seen), patch)
    return fn


@pytest.mark.parametrize("writes", [False, True])
async def test_a_first_run_retry_then_a_persons_change_gives_the_new_state_a_new_key(
        server: Server, writes: bool) -> None:
    """The key kept by a Retry (``acted: false``) is the key of the state it was given for: a
    person's change of the state after it gives another key, and nothing is acted on."""
    seen: list[tuple[bool, str]] = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        if writes:
            patch.status["deletion"] = {"requested": run}
        return kopf_outcomes.Retry("down", delay=1) if run == 1 else Pending("waiting", recheck=60)

    op = deletion_operator(server, recalling(seen, then))
    await op.event()
    server.body["spec"] = {"size": 2}  # a person's change: another state
    server.age(61)
    await op.event()
    server.age(61)
    await op.event()  # the recheck: the new state's key, acted on
    assert [acted for acted, _ in seen] == [False, False, True]
    assert seen[0][1] != seen[1][1] == seen[2][1]


async def test_a_stock_handler_that_writes_and_fails_leaves_no_memory(server: Server) -> None:
    """Stock parity: a handler that neither recalls nor returns an outcome, writing and failing
    with Kopf's own errors, gets Kopf's own writes only (no memory annotation, no release hold)."""
    runs: list[int] = []

    def fn(patch: kopf.Patch, **_: Any) -> None:
        runs.append(len(runs))
        patch.status["deletion"] = {"requested": len(runs)}
        if len(runs) < 3:
            raise kopf.TemporaryError("down", delay=1)

    op = deletion_operator(server, fn)
    for _ in range(3):
        await op.event()
        server.age(61)
    assert server.finalized and len(runs) == 3
    assert not any(DEFAULT_KEYS.memory in str(sent) for sent in server.sent)


# --- 1b. a release set before a handler waited, for an object that left the filters (held.py) -----

@RELEASES_BEFORE_THE_MEMORY
@pytest.mark.parametrize("value", ["*", "h", "h@anything"])
async def test_a_release_set_before_the_handler_waited_does_not_free_an_object_that_left_the_filters(
        server: Server, value: str) -> None:
    """The release annotation is there before the deletion handler parks (left from an earlier
    object's release, or set in advance); the object is then relabelled out of the handlers'
    filters. Nobody saw this handler held: a release set before it waited answers nothing of it,
    as a release set before a retention answers nothing of that retention."""
    seen: list[tuple[bool, str]] = []
    server.body["metadata"]["labels"] = {"shard": "a"}
    release(server, value)
    registry = kopf.OperatorRegistry()
    kopf.on.delete(*RESOURCE, registry=registry, id="h", labels={"shard": "a"})(
        recalling(seen, lambda run, patch: Pending("waiting for the callback")))
    op = Operator(server, registry)
    await op.event()
    assert server.records()["h"]["outcome"] == "pending" and not server.finalized
    server.body["metadata"]["labels"] = {"shard": "b"}  # it left the filters mid-deletion
    await op.event()
    assert not server.finalized, "released by an annotation set before the handler waited"


# --- 1c. a retained sub-handler's stamp ---------------------------------------------------------

async def test_a_retained_sub_handler_is_released_by_its_own_id_and_stamp_only(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    runs: list[str] = []

    async def parent(**_: Any) -> None:
        runs.append("parent")
        await kopf.execute(fns={"child": retaining(runs, "child")})

    registry = kopf.OperatorRegistry()
    kopf.on.delete(*RESOURCE, registry=registry, id="parent")(parent)
    op = Operator(server, registry)
    await op.event()
    await op.event()
    records = server.records()
    assert records["parent/child"]["outcome"] == "retained" and not server.finalized
    stamp = records["parent/child"]["stamp"]
    child_runs = runs.count("child")
    for wrong in [f"parent@{stamp}", "parent/child", "parent", "*", f"parent/other@{stamp}", f"child@{stamp}"]:
        release(server, wrong)
        await op.event()
        await op.event()
        assert not server.finalized, wrong
    assert runs.count("child") == child_runs  # not run again by any of them
    release(server, f"parent/child@{stamp}")
    for _ in range(3):
        await op.event()
    assert server.finalized and runs.count("child") == child_runs


@RELEASES_BEFORE_THE_MEMORY
@pytest.mark.parametrize("handler_id", [
    "backup/s3",
    "a@b", "a,b"])
async def test_a_waiting_handler_with_an_odd_id_holds_an_object_that_left_the_filters(
        server: Server, handler_id: str) -> None:
    """Kopf takes any string as a handler's id (``id=``); a sub-handler's is ``<parent>/<child>``."""
    seen: list[tuple[bool, str]] = []
    server.body["metadata"]["labels"] = {"shard": "a"}
    registry = kopf.OperatorRegistry()
    kopf.on.delete(*RESOURCE, registry=registry, id=handler_id, labels={"shard": "a"})(
        recalling(seen, lambda run, patch: Pending("waiting for the callback")))
    op = Operator(server, registry)
    await op.event()
    assert server.records()[handler_id]["outcome"] == "pending" and not server.finalized
    server.body["metadata"]["labels"] = {"shard": "b"}  # it left the filters mid-deletion
    await op.event()
    await op.event()
    assert not server.finalized


@pytest.mark.parametrize("handler_id", [
    "a,b",
    "a@b", "x/y", "a b", "*"])
async def test_a_retained_handler_with_an_odd_id_is_released_by_the_value_its_log_gives(
        server: Server, handler_id: str) -> None:
    runs: list[str] = []
    registry = kopf.OperatorRegistry()
    kopf.on.delete(*RESOURCE, registry=registry, id=handler_id)(retaining(runs, "a"))
    op = Operator(server, registry)
    await op.event()
    assert server.records()[handler_id]["outcome"] == "retained" and not server.finalized
    release(server, stamped(server.annotations, handler_id))
    await op.event()
    await op.event()
    assert server.finalized and runs == ["a"]


# --- 5b. an observer that fails as a retention is released ------------------------------------------

class FailsOnTheRelease:
    """An observer that fails on the second run it is told of (the first: the retention)."""

    told = 0

    @kopf_outcomes.hookimpl
    def kopf_outcomes_observe_outcome(self, run: kopf_outcomes.HandlerRun, outcome: Outcome, patch: Any) -> None:
        FailsOnTheRelease.told += 1
        if FailsOnTheRelease.told == 2:
            raise RuntimeError("the metrics backend is down")


async def test_an_observer_failing_on_a_release_neither_runs_the_handler_nor_strands_the_object(
        server: Server) -> None:
    """A person releases a retained handler as the log says; the observer told of that release
    fails (a metrics backend down): the release may be retried, but the handler must not run."""
    kopf_outcomes.install(entry_points=False, events=False, plugins=[FailsOnTheRelease()])
    FailsOnTheRelease.told = 0
    runs: list[str] = []
    op = deletion_operator(server, retaining(runs, "a"))
    await op.event()
    assert server.records()["h0"]["outcome"] == "retained"
    release(server, stamped(server.annotations, "h0"))
    for _ in range(4):
        await op.event()
        server.age(61)
    assert runs == ["a"], "the retained handler ran again"
    assert server.finalized, (FailsOnTheRelease.told, server.records(), server.annotations.get(DEFAULT_KEYS.release))


def told_waits(monkeypatch: pytest.MonkeyPatch) -> list[list[float]]:
    """The seconds until each cycle's handlers of ours are looked at again, as told to Kopf's apply()."""
    found: list[list[float]] = []
    tell = delays.tell

    def spying(patch: object, final: Any, ours: Any, waits: Any, *args: Any) -> None:
        found.append(list(waits))
        tell(patch, final, ours, waits, *args)
    monkeypatch.setattr(delays, "tell", spying)
    return found


async def test_a_release_an_observer_failed_on_stays_retained_and_is_attempted_again_at_the_retrys_delay(
        server: Server, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The retry of a release leaves all as it was (the record and its stamp, Kopf's retained mark,
    the person's annotation), says so at ERROR, and comes back by itself: no event is needed."""
    kopf_outcomes.install(entry_points=False, events=False, plugins=[FailsOnTheRelease()])
    FailsOnTheRelease.told = 0
    runs: list[str] = []
    op = deletion_operator(server, retaining(runs, "a"))
    await op.event()
    record, value = server.records()["h0"], stamped(server.annotations, "h0")
    release(server, value)
    waits = told_waits(monkeypatch)
    await op.event()
    assert not server.finalized and server.records()["h0"] == {**record, "deadline": server.records()["h0"]["deadline"]}
    assert server.annotations[DEFAULT_KEYS.release] == value
    progress = json.loads(server.annotations["kopf.zalando.org/h0"])
    assert progress["message"].endswith("[finalizer retained by kopf-outcomes]")
    assert any(0 < wait <= 60.5 for wait in waits[-1]), waits  # the retry's delay (the run's backoff), not ten years
    assert "The release of Handler 'h0' is retried in 60 s" in caplog.text
    assert "the metrics backend is down" in caplog.text
    await op.event()  # the event of the cycle's own write: the retry waits its delay (no busy loop)
    assert not server.finalized and FailsOnTheRelease.told == 2
    server.age(61)
    await op.event()  # the requeued event, at the retry's deadline: the observer answers now
    assert server.finalized and runs == ["a"] and FailsOnTheRelease.told == 3
    assert DEFAULT_KEYS.release not in server.annotations


async def test_a_release_an_observer_failed_on_is_not_attempted_again_once_its_annotation_is_gone(
        server: Server) -> None:
    """Fail closed: the retry re-attempts the person's release only while it stands."""
    kopf_outcomes.install(entry_points=False, events=False, plugins=[FailsOnTheRelease()])
    FailsOnTheRelease.told = 0
    runs: list[str] = []
    op = deletion_operator(server, retaining(runs, "a"))
    await op.event()
    stamp = server.records()["h0"]["stamp"]
    release(server, stamped(server.annotations, "h0"))
    await op.event()
    del server.annotations[DEFAULT_KEYS.release]  # withdrawn
    for _ in range(3):
        server.age(61)
        await op.event()
    retained = server.records()["h0"]
    assert not server.finalized and runs == ["a"] and (retained["outcome"], retained["stamp"]) == ("retained", stamp)
    assert FailsOnTheRelease.told == 2  # the retention, the failed release: nothing since


class FailsOnce:
    """An observer that fails once, when told of the handler it is armed for."""

    armed: str | None = None

    @kopf_outcomes.hookimpl
    def kopf_outcomes_observe_outcome(self, run: kopf_outcomes.HandlerRun, outcome: Outcome, patch: Any) -> None:
        if run.handler_id == FailsOnce.armed:
            FailsOnce.armed = None
            raise RuntimeError("the metrics backend is down")


async def test_a_retained_sub_handlers_release_an_observer_failed_on_is_retried_without_running_the_child(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent waits with its child until the child's release is attempted again (its deadline)."""
    kopf_outcomes.install(entry_points=False, events=False, plugins=[FailsOnce()])
    runs: list[str] = []

    async def parent(**_: Any) -> None:
        await kopf.execute(fns={"child": retaining(runs, "child")})

    registry = kopf.OperatorRegistry()
    kopf.on.delete(*RESOURCE, registry=registry, id="parent")(parent)
    op = Operator(server, registry)
    await op.event()
    await op.event()
    assert server.records()["parent/child"]["outcome"] == "retained" and runs == ["child"]
    waits = told_waits(monkeypatch)
    release(server, stamped(server.annotations, "parent/child"))
    FailsOnce.armed = "parent/child"
    await op.event()
    assert not server.finalized and server.records()["parent/child"]["outcome"] == "retained"
    assert any(0 < wait <= 60.5 for wait in waits[-1]), waits
    await op.event()  # the event of the cycle's own write: the retry waits its delay
    assert not server.finalized
    for _ in range(2):
        server.age(61)
        await op.event()
    assert server.finalized and runs == ["child"]


class ReadsTheMemory:
    """An observer that reads, as the conditions plugin does, the handler's record in the patch."""

    seen: list[dict[str, Any] | None] = []

    @kopf_outcomes.hookimpl
    def kopf_outcomes_observe_outcome(self, run: kopf_outcomes.HandlerRun, outcome: Outcome, patch: Any) -> None:
        raw = ((patch.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_KEYS.memory)
        ReadsTheMemory.seen.append(json.loads(raw).get(run.handler_id) if raw else None)


@pytest.mark.parametrize("concluding", ["retained", "pending", "released"])
async def test_observers_are_told_a_conclusion_with_its_record_already_in_the_patch(
        server: Server, concluding: str) -> None:
    """The memory write of a conclusion comes first, whatever it concludes: an observer reads the
    record (a retention's stamp) as the PATCH will store it; a release's, as a released Fatal's (no
    stamp, no retention), which the cycle's end removes where nothing was written into its state."""
    kopf_outcomes.install(entry_points=False, events=False, plugins=[ReadsTheMemory()])
    ReadsTheMemory.seen = []
    runs: list[str] = []
    fn = (lambda **_: Pending("waiting for the callback")) if concluding == "pending" else retaining(runs, "a")
    op = deletion_operator(server, fn)
    await op.event()
    if concluding == "released":
        release(server, stamped(server.annotations, "h0"))
        await op.event()
        told = ReadsTheMemory.seen[-1]
        assert told is not None and told["outcome"] == "fatal" and "stamp" not in told  # told: no retention
        assert server.finalized and "h0" not in server.records()  # nothing written into its state: it goes
    else:
        assert ReadsTheMemory.seen == [server.records()["h0"]]


# --- 1d. Kopf's own final failures, retained: stamped too ---------------------------------------------

@pytest.mark.parametrize("failure", ["permanent", "retries"])
async def test_kopfs_own_final_failure_retained_is_stamped_and_the_old_form_holds(server: Server, failure: str) -> None:
    runs: list[int] = []

    def fn(**_: Any) -> None:
        runs.append(len(runs))
        if failure == "permanent":
            raise kopf.PermanentError("the backup failed")
        raise kopf.TemporaryError("the backup failed", delay=1)

    registry = kopf.OperatorRegistry()
    kopf_outcomes.handler_options(fatal_on_delete="retain")(
        kopf.on.delete(*RESOURCE, registry=registry, id="h", retries=2)(fn))
    op = Operator(server, registry)
    for _ in range(3):
        await op.event()
        server.age(61)
    record = server.records()["h"]
    assert record["outcome"] == "retained" and record.get("stamp") and not server.finalized
    ran = len(runs)
    for old_form in ["h", "*"]:
        release(server, old_form)
        await op.event()
        assert not server.finalized
    release(server, stamped(server.annotations, "h"))
    await op.event()
    assert server.finalized and len(runs) == ran
