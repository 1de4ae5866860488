"""
Once per state, through Kopf's real processing of one object's events (:mod:`.one_object`):
``acted_on_this_state`` and the idempotency key depend on the state the handler acted on, and on
nothing the handler, Kopf, another operator or an upgrade writes; a record is the object's (its
uid); a release answers one retention; an unreadable memory holds.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import Fatal, Outcome, Pending, Retry
from kopf_outcomes.memory import DEFAULT_KEYS
from tests.unit import one_object
from tests.unit.one_object import RELEASES_BEFORE_THE_MEMORY, Operator, Server, server
from tests.unit.releases import stamped

__all__ = ["server"]

RESOURCE = ("kopf.dev", "v1", "kopfexamples")
Seen = list[tuple[bool, str]]  # per run: acted_on_this_state, idempotency_key


@pytest.fixture(autouse=True)
def installed(unpatched: None) -> Iterator[None]:
    kopf_outcomes.install(entry_points=False, events=False)
    yield


def waiting(seen: Seen, then: Callable[[int, kopf.Patch], Outcome | None] | None = None) -> Callable[..., Any]:
    """A handler that recalls its memory, starts its side effect where it did not act yet, and
    waits with a recheck (``then`` may decide otherwise, by the run's number)."""
    def fn(patch: kopf.Patch, **_: Any) -> Outcome | None:
        memory = kopf_outcomes.recall()
        seen.append((memory.acted_on_this_state, memory.idempotency_key))
        return then(len(seen), patch) if then is not None else Pending("waiting for the callback", recheck=60)
    return fn


def operator(server: Server, *fns: Callable[..., Any], **options: Any) -> Operator:
    registry = kopf.OperatorRegistry()
    for index, fn in enumerate(fns):
        kopf.on.delete(*RESOURCE, registry=registry, id=f"h{index}" if len(fns) > 1 else "h", **options)(fn)
    return Operator(server, registry)


# --- 1. a Retry or an error keeps what the handler acted on -------------------------------------

FAILURES: dict[str, Callable[[], Outcome]] = {
    "Retry": lambda: Retry("the callback's service is down", delay=1),
    "TemporaryError": lambda: (_ for _ in ()).throw(kopf.TemporaryError("down", delay=1)),
    "an exception": lambda: (_ for _ in ()).throw(RuntimeError("down")),
}


@pytest.mark.parametrize("failure", list(FAILURES))
async def test_a_retry_or_an_error_after_a_pending_keeps_the_record_of_the_state_it_acted_on(
        server: Server, failure: str) -> None:
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        return FAILURES[failure]() if run == 2 else Pending("waiting for the callback", recheck=60)

    op = operator(server, waiting(seen, then), backoff=1)
    await op.event()  # Pending: it started the side effect
    server.age(61)
    await op.event()  # the recheck, on the same state: it fails
    server.age(61)
    await op.event()  # the retry, on the same state
    assert [acted for acted, _ in seen] == [False, True, True]
    assert len({key for _, key in seen}) == 1
    assert not server.finalized


async def test_a_retry_on_a_changed_state_remembers_nothing_about_the_new_one(server: Server) -> None:
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        return Retry("down", delay=1) if run == 2 else Pending("waiting for the callback")

    op = operator(server, waiting(seen, then))
    await op.event()
    server.body["spec"] = {"size": 2}  # a person's change wakes it: a state no conclusion was about
    await op.event()
    server.age(61)
    await op.event()
    assert [acted for acted, _ in seen] == [False, False, False]
    assert seen[1][1] == seen[2][1] != seen[0][1]  # the new state's key, the same on its retry


# --- 2. the handler's own write keeps its key --------------------------------------------------

async def test_the_handlers_own_write_through_kopfs_patch_keeps_its_key(server: Server) -> None:
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["deletion"] = {"requested": run}
        return Retry("down", delay=1) if run == 3 else Pending("waiting for the callback", recheck=60)

    op = operator(server, waiting(seen, then))
    await op.event()
    assert server.body["status"]["deletion"] == {"requested": 1}  # its write landed with the memory
    server.age(61)
    await op.event()  # a recheck: the state is the one it acted on, with its own write
    server.age(61)
    await op.event()  # it writes and fails
    server.age(61)
    await op.event()
    assert [acted for acted, _ in seen] == [False, True, True, True]
    assert len({key for _, key in seen}) == 1


@pytest.mark.parametrize("failure", list(FAILURES))
async def test_a_failure_on_the_first_run_after_the_handlers_own_write_keeps_its_key(
        server: Server, failure: str) -> None:
    """No conclusion is about the state yet, so nothing was acted on; but the key it was given
    stays the key of that state, its own write included (issue 42, left open of finding 2)."""
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["deletion"] = {"requested": run}
        return FAILURES[failure]() if run <= 2 else Pending("waiting for the callback", recheck=60)

    op = operator(server, waiting(seen, then), backoff=1)
    await op.event()  # it writes, then fails: no conclusion about its state
    server.age(61)
    await op.event()  # the retry, on the state with its own write: fails again
    server.age(61)
    await op.event()  # the retry: Pending
    server.age(61)
    await op.event()  # the recheck
    assert [acted for acted, _ in seen] == [False, False, False, True]
    assert len({key for _, key in seen}) == 1
    assert "acted" not in server.records()["h"]  # a conclusion: about the state it acted on


async def test_a_failure_on_the_first_run_keeps_its_key_across_a_later_handlers_write(server: Server) -> None:
    """Found by the generated histories: the handler fails before any conclusion, and a handler
    after it in the same cycle writes to the object; the retry sees that write (the operator's own),
    and gets the same key."""
    seen: Seen = []

    def writes(patch: kopf.Patch, **_: Any) -> None:
        patch.status["other"] = {"done": True}

    op = operator(server, waiting(seen, lambda run, patch: Retry("down", delay=1) if run == 1 else None), writes)
    await op.event()
    assert server.body["status"]["other"] == {"done": True}
    server.age(61)
    await op.event()
    assert [acted for acted, _ in seen] == [False, False]
    assert len({key for _, key in seen}) == 1


async def test_another_handlers_own_writes_keep_the_key_of_a_retried_sub_handler_whose_parent_waits(
        server: Server) -> None:
    """A sub-handler given its key fails before any conclusion (its record: that key, ``acted: false``).
    While it waits for its retry, Kopf does not run its parent; another handler retries and writes its
    status in each of those cycles. Those writes are the operator's own: the sub-handler's retry gets
    the same key, still not acted on (new-subhandler-rekey)."""
    seen: Seen = []
    writes: list[int] = []

    def writer(patch: kopf.Patch, **_: Any) -> Outcome:
        writes.append(len(writes))
        patch.status["counter"] = len(writes)
        return Retry("not yet", delay=1)

    def parent(**_: Any) -> None:
        kopf.subhandler(id="child")(waiting(seen, lambda run, patch: Retry("the service is down", delay=60)))

    op = operator(server, writer, parent)
    await op.event()
    for _ in range(3):  # the writer is due every time; the parent waits for its child's retry
        server.age(2)
        await op.event()
    assert len(seen) == 1 and len(writes) == 4
    server.age(61)
    await op.event()
    assert [acted for acted, _ in seen] == [False, False]
    assert len({key for _, key in seen}) == 1


class FailingObserver:
    """An observer that fails on the first run it is told of: that run is retried."""

    told = 0

    @kopf_outcomes.hookimpl
    def kopf_outcomes_observe_outcome(self, run: kopf_outcomes.HandlerRun, outcome: Outcome, patch: Any) -> None:
        FailingObserver.told += 1
        if FailingObserver.told == 1:
            raise RuntimeError("the metrics backend is down")


async def test_an_observers_failure_after_the_handlers_own_write_keeps_its_key(server: Server) -> None:
    """The run is retried, so it is remembered as a Retry, not as the Success the handler returned
    (which ends the record, and with it the key of the state its own write changed)."""
    kopf_outcomes.install(entry_points=False, events=False, plugins=[FailingObserver()])
    FailingObserver.told = 0
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["deletion"] = {"requested": True}
        return kopf_outcomes.Success()

    op = operator(server, waiting(seen, then))
    await op.event()  # it writes and succeeds; the observer fails: retried
    assert not server.finalized
    server.age(61)
    await op.event()  # the retry, on the state with its own write
    assert [acted for acted, _ in seen] == [False, False]
    assert len({key for _, key in seen}) == 1
    assert server.finalized


class Killed(BaseException):
    """The operator dies before this PATCH is sent: nothing of Kopf's handles it (Kopf 1.37 logs an
    ``Exception`` from its PATCH and goes on)."""


def killed_before_the_finalizers_removal(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator dies before the PATCH that removes Kopf's finalizer, once: on Kopf >= 1.38 its
    own JSON patch, after the merge-patches (the object's, then its status subresource's); on 1.37
    the object's merge-patch, which carries the finalizer's removal and the memory together."""
    sent = server.patch

    async def patch(*, payload: Any, **kwargs: Any) -> dict[str, Any]:
        removes = (any(op.get("path", "").startswith("/metadata/finalizers") for op in payload)
                   if isinstance(payload, list) else "finalizers" in payload.get("metadata", {}))
        if removes and not killed:
            killed.append(payload)
            raise Killed("the operator died before removing its finalizer")
        return await sent(payload=payload, **kwargs)

    killed: list[Any] = []
    monkeypatch.setattr(one_object.api, "patch", patch)


@pytest.fixture(params=[False, True], ids=["status-in-the-object", "status-subresource"])
def status_subresource(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """The status as a subresource: Kopf PATCHes it after the object (the memory) in its own request."""
    if request.param:
        monkeypatch.setattr(one_object, "RESOURCE", dataclasses.replace(one_object.RESOURCE,
                                                                        subresources=frozenset({"status"})))
    return bool(request.param)


async def rerun_after_the_kill(op: Operator, field: str) -> bool:
    """Whether the run's own write (``status.<field>``) landed before the kill."""
    with pytest.raises(Killed):
        await op.event()
    landed = field in op.server.body.get("status", {})
    op.restart()  # Kopf purged its progress in the PATCHes that landed: it runs the handler again
    await op.event()
    return landed


async def test_a_kill_after_a_successful_runs_own_write_keeps_its_key_and_what_it_acted_on(
        server: Server, monkeypatch: pytest.MonkeyPatch, status_subresource: bool) -> None:
    """The handler writes its status through Kopf's patch and succeeds; the operator dies before the
    finalizer's removal. The run again on the state it acted on (its own write in it, where that
    landed) has its key, and knows it acted: the record of a Success whose cycle wrote into its state
    is kept for that state (new-own-write-kill)."""
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["deletion"] = {"requested": run}
        return kopf_outcomes.Success()

    op = operator(server, waiting(seen, then))
    killed_before_the_finalizers_removal(server, monkeypatch)
    landed = await rerun_after_the_kill(op, "deletion")
    assert [acted for acted, _ in seen] == [False, landed]  # Kopf 1.37: nothing landed, nothing was acted on
    assert len({key for _, key in seen}) == 1
    assert server.finalized


async def test_a_kill_after_a_later_handlers_write_keeps_a_successful_runs_key(
        server: Server, monkeypatch: pytest.MonkeyPatch, status_subresource: bool) -> None:
    """The operator's writes in the cycle are the state the Success concluded about, whichever handler
    wrote them: a later handler's (a stock one) too."""
    seen: Seen = []

    def writes(patch: kopf.Patch, **_: Any) -> None:
        patch.status["other"] = {"done": True}

    op = operator(server, waiting(seen, lambda run, patch: kopf_outcomes.Success()), writes)
    killed_before_the_finalizers_removal(server, monkeypatch)
    landed = await rerun_after_the_kill(op, "other")
    assert [acted for acted, _ in seen] == [False, landed]
    assert len({key for _, key in seen}) == 1
    assert server.finalized


RELEASING_FAILURES: dict[str, Callable[[], Outcome]] = {
    "Fatal": lambda: Fatal("the external system refused", on_delete="release"),
    "PermanentError": lambda: (_ for _ in ()).throw(kopf.PermanentError("refused")),
}


@pytest.mark.parametrize("failure", list(RELEASING_FAILURES))
async def test_a_kill_after_a_released_fatals_own_write_keeps_its_key_and_what_it_acted_on(
        server: Server, monkeypatch: pytest.MonkeyPatch, status_subresource: bool, failure: str) -> None:
    """As for a Success: the handler writes its status through Kopf's patch and fails for good, which
    lets the finalizer go; the operator dies before its removal. The run again on the state it acted on
    has its key and knows it acted: the record of a released Fatal whose cycle wrote into its state is
    kept for that state, as a ``fatal`` one (no retention: it holds nothing), new-own-write-kill-fatal."""
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["deletion"] = {"requested": run}
        return RELEASING_FAILURES[failure]()

    op = operator(server, waiting(seen, then))
    killed_before_the_finalizers_removal(server, monkeypatch)
    landed = await rerun_after_the_kill(op, "deletion")
    assert [acted for acted, _ in seen] == [False, landed]  # Kopf 1.37: nothing landed, nothing was acted on
    assert len({key for _, key in seen}) == 1
    assert server.finalized


async def test_a_released_fatals_kept_record_holds_no_finalizer(server: Server) -> None:
    """The record a released Fatal keeps (its cycle wrote into its state) is no retention: it has no
    stamp, and once the other deletion handler is done, the finalizer goes with it still there."""
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["deletion"] = {"requested": run}
        return Fatal("the external system refused", on_delete="release")

    other: list[bool] = []

    def waits_once(**_: Any) -> Outcome | None:
        other.append(True)
        return Pending("waiting for the callback") if len(other) == 1 else None

    op = operator(server, waiting(seen, then), waits_once)
    await op.event()
    kept = server.records()["h0"]
    assert kept["outcome"] == "fatal" and "stamp" not in kept and not server.finalized  # h1 waits
    server.annotations["example.com/callback"] = "done"  # wakes h1, which is done now
    await op.event()
    assert server.finalized and len(seen) == 1


@pytest.mark.parametrize("recalls", [False, True], ids=["stock", "recalling"])
async def test_a_success_that_writes_nothing_into_its_state_or_was_given_no_key_keeps_no_record(
        server: Server, recalls: bool) -> None:
    """A Success ends its record, as ever, where its cycle wrote nothing into its state (a handler that
    recalls its memory and writes nothing); and a stock handler, given no key, writes no memory at all
    (stock parity), its own write or not."""
    def stock(patch: kopf.Patch, **_: Any) -> None:
        patch.status["deletion"] = {"requested": True}

    op = operator(server, waiting([], lambda run, patch: kopf_outcomes.Success()) if recalls else stock)
    await op.event()
    assert server.finalized
    assert not any(DEFAULT_KEYS.memory in json.dumps(payload) for payload in server.sent)


# --- 3. an upgrade keeps the key of an unchanged object ----------------------------------------

@pytest.mark.parametrize("scope", [{"depends_on": ["spec.size"]}, {"ignore": ["status.phase"]}])
async def test_an_upgrade_that_changes_the_scope_keeps_the_key_of_an_unchanged_object(
        server: Server, scope: dict[str, list[str]]) -> None:
    seen: Seen = []
    server.body.update(spec={"size": 1}, status={"phase": "Terminating"})
    before = operator(server, kopf_outcomes.handler_options(**scope)(waiting(seen)))  # type: ignore[arg-type]
    await before.event()
    after = operator(server, waiting(seen))  # the new version: the default scope
    await after.event()  # a changed digest wakes it once
    await after.event()
    assert [acted for acted, _ in seen] == [False, True]
    assert seen[0][1] == seen[1][1]
    assert not {"depends_on", "ignore"} & set(server.records()["h"])  # the record now in the new scope


async def test_an_upgrade_that_moves_kopfs_progress_storage_keeps_the_key(server: Server) -> None:
    seen: Seen = []
    before = operator(server, waiting(seen))
    before.settings.persistence.progress_storage = kopf.StatusProgressStorage(field="status.my-op.progress")
    await before.event()
    assert "progress" in server.body["status"]["my-op"]
    after = operator(server, waiting(seen))  # Kopf's default storage
    await after.event()
    assert len(seen) == 1  # Kopf's progress of it is gone with the move: the memory's grid waits
    server.age(61)
    await after.event()
    assert [acted for acted, _ in seen] == [False, True]
    assert seen[0][1] == seen[1][1]


# --- 4. another operator's bookkeeping ---------------------------------------------------------

async def test_another_operators_bookkeeping_in_status_neither_wakes_it_nor_changes_its_key(server: Server) -> None:
    seen: Seen = []
    op = operator(server, waiting(seen))
    await op.event()
    status = server.body.setdefault("status", {})
    status["b-op"] = {"progress": {"other_fn": {"started": "2026-12-04T00:00:00", "retries": 1,
                                                "delayed": "2026-12-04T00:01:00", "message": "down"}},
                      "last-handled-configuration": json.dumps({"spec": {}}), "dummy": "2026-12-04T00:00:01"}
    await op.event()
    assert len(seen) == 1  # not woken
    server.age(61)
    await op.event()  # its recheck
    assert seen == [(False, seen[0][1]), (True, seen[0][1])]


# --- 5. a record belongs to its object ---------------------------------------------------------

async def test_a_restored_object_with_a_new_uid_does_not_inherit_the_record(server: Server) -> None:
    seen: Seen = []
    op = operator(server, waiting(seen))
    await op.event()
    restored = json.loads(json.dumps(server.body))
    restored["metadata"]["uid"] = "u2"  # restored from a backup: everything but the uid is the same
    server.body = restored
    op.restart()
    server.age(61)  # its recheck (Kopf's retry, as the restored progress says) is due
    await op.event()
    assert [acted for acted, _ in seen] == [False, False]
    assert seen[0][1] != seen[1][1]
    assert server.records()["h"]["uid"] == "u2"


# --- 6. a release answers one retention --------------------------------------------------------

def retaining(runs: list[str], name: str, when: Callable[[dict[str, Any]], bool] = lambda status: True
              ) -> Callable[..., Outcome]:
    def fn(status: dict[str, Any], **_: Any) -> Outcome:
        runs.append(name)
        if when(status):
            return Fatal("the external system refused", on_delete="retain")
        return Pending("waiting for its turn")
    return fn


async def test_a_release_is_consumed_and_releases_no_handler_retained_later(server: Server) -> None:
    runs: list[str] = []
    op = operator(server, retaining(runs, "a"), retaining(runs, "b", lambda status: status.get("go") == "yes"))
    await op.event()  # a retained, b waits
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "h0")  # what is retained: a
    await op.event()
    assert DEFAULT_KEYS.release not in server.annotations  # answered: gone in the same PATCH
    assert {record["outcome"] for record in server.records().values()} == {"pending"}
    server.body["status"] = {"go": "yes"}
    await op.event()  # b retained
    await op.event()
    assert server.records()["h1"]["outcome"] == "retained"
    assert not server.finalized


@pytest.mark.parametrize("old_form", ["h", "*"])
async def test_a_release_without_the_retentions_stamp_is_held_with_an_error_saying_how(
        server: Server, caplog: pytest.LogCaptureFixture, old_form: str) -> None:
    """A release must carry the stamp of the retention it answers: the old form (the name, or ``*``)
    cannot be told from one set before the retention, so it releases nothing, and one ERROR names
    the value that does."""
    runs: list[str] = []
    op = operator(server, retaining(runs, "a"))
    await op.event()
    assert server.records()["h"]["outcome"] == "retained"
    server.annotations[DEFAULT_KEYS.release] = old_form
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        await op.event()
    assert not server.finalized and runs == ["a"]
    [error] = [record.message for record in caplog.records if record.levelno == logging.ERROR]
    assert f"{DEFAULT_KEYS.release}={stamped(server.annotations, 'h')}" in error
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "h")
    await op.event()
    assert server.finalized and runs == ["a"]


async def test_a_leftover_release_is_ignored_with_a_line_saying_so(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    runs: list[str] = []
    server.annotations[DEFAULT_KEYS.release] = "h"  # set before anything was retained
    op = operator(server, retaining(runs, "a"))
    with caplog.at_level(logging.WARNING):
        await op.event()
    await op.event()
    assert server.records()["h"]["outcome"] == "retained" and not server.finalized
    assert DEFAULT_KEYS.release not in server.annotations
    assert any("Ignored the release annotation" in record.message for record in caplog.records)
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "h")  # now it answers this retention
    await op.event()
    assert server.finalized and DEFAULT_KEYS.release not in server.annotations


# --- 7. an unreadable memory holds --------------------------------------------------------------

@RELEASES_BEFORE_THE_MEMORY
async def test_an_unreadable_memory_holds_an_object_that_left_the_operators_filters(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    seen: Seen = []
    server.body["metadata"]["labels"] = {"shard": "a"}
    op = operator(server, waiting(seen), labels={"shard": "a"})
    await op.event()
    server.body["metadata"]["labels"] = {"shard": "b"}  # it left the filters mid-deletion
    server.annotations[DEFAULT_KEYS.memory] = server.annotations[DEFAULT_KEYS.memory][:-1]  # a typo
    with caplog.at_level(logging.ERROR, "kopf_outcomes"):
        await op.event()
    assert not server.finalized
    errors = [record.message for record in caplog.records if record.levelno == logging.ERROR]
    assert len(errors) == 1 and "cannot be read" in errors[0] and f"{DEFAULT_KEYS.release}=*" in errors[0]


async def test_an_unreadable_memory_of_an_object_whose_handlers_are_done_lets_it_go(server: Server) -> None:
    server.annotations[DEFAULT_KEYS.memory] = '{"h": {"digest": "d", "outcome": "from-a-newer-version"}}'
    op = operator(server, lambda **_: None)
    await op.event()
    assert server.finalized



# --- what the record does not survive -----------------------------------------------------------

async def test_success_ends_the_record(server: Server) -> None:
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        return kopf_outcomes.Success() if run == 2 else Pending("waiting for the callback")

    op = operator(server, waiting(seen, then))
    await op.event()
    server.body["status"] = {"callback": "done"}
    await op.event()
    assert server.finalized and server.records() == {}


@pytest.mark.parametrize("writes", [False, True])
async def test_a_lost_memory_keys_the_state_as_it_is_now(server: Server, writes: bool) -> None:
    """A person removed the memory: the run Kopf's parked mark brings knows nothing of what it did.
    Its key is the first one again, unless its own writes changed the state: then they are part of it."""
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        if writes:
            patch.status["deletion"] = {"requested": True}
        return Pending("waiting for the callback")

    op = operator(server, waiting(seen, then))
    await op.event()
    del server.annotations[DEFAULT_KEYS.memory]
    await op.event()
    assert [acted for acted, _ in seen] == [False, False]
    assert (seen[0][1] != seen[1][1]) is writes
