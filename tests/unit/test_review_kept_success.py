"""
Review of ``ownkill`` (a Success whose cycle writes into its own state keeps its record): attempts
to break it through Kopf's real processing of one object's events (:mod:`.one_object`). Each test
states the suspicion it tries; a failing one is a strict xfail naming the function at fault.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
from collections.abc import Callable, Iterator
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import Outcome, Pending
from kopf_outcomes._kopf import held
from kopf_outcomes.diagnosis.kube import Kind
from kopf_outcomes.diagnosis.report import report
from kopf_outcomes.memory import DEFAULT_KEYS
from tests.unit import one_object
from tests.unit.one_object import FINALIZER, Operator, Server, server

__all__ = ["server"]

RESOURCE = ("kopf.dev", "v1", "kopfexamples")
Seen = list[tuple[bool, str]]  # per run: acted_on_this_state, idempotency_key
# Kopf >= 1.38 removes its finalizer in a JSON patch after the merge-patches; 1.37 in the object's
# merge-patch, with the memory (and before /status): there a kill before it loses the memory too.
KOPF_138 = tuple(int(part) for part in importlib.metadata.version("kopf").split(".")[:2]) >= (1, 38)


@pytest.fixture(autouse=True)
def installed(unpatched: None) -> Iterator[None]:
    kopf_outcomes.install(entry_points=False, events=False)
    yield


@pytest.fixture
def status_subresource(monkeypatch: pytest.MonkeyPatch) -> None:
    """The status as a subresource: Kopf PATCHes the object (the memory), then its ``/status``."""
    monkeypatch.setattr(one_object, "RESOURCE", dataclasses.replace(one_object.RESOURCE,
                                                                    subresources=frozenset({"status"})))


class Killed(BaseException):
    """The operator dies before this PATCH is sent."""


def killed_before(server: Server, monkeypatch: pytest.MonkeyPatch, which: Callable[[str, Any], bool]) -> list[Any]:
    """The operator dies, once, before the first PATCH that ``which(url, payload)`` picks."""
    sent = server.patch
    killed: list[Any] = []

    async def patch(*, payload: Any, url: str = "", **kwargs: Any) -> dict[str, Any]:
        if which(url, payload) and not killed:
            killed.append(payload)
            raise Killed("the operator died")
        return await sent(payload=payload, url=url, **kwargs)

    monkeypatch.setattr(one_object.api, "patch", patch)
    return killed


def the_status_patch(url: str, payload: Any) -> bool:
    return url.rstrip("/").endswith("/status")


def the_finalizers_removal(url: str, payload: Any) -> bool:
    if isinstance(payload, list):
        return any(op.get("path", "").startswith("/metadata/finalizers") for op in payload)
    return "finalizers" in (payload.get("metadata") or {})


def recalling(seen: Seen, then: Callable[[int, kopf.Patch], Outcome | None]) -> Callable[..., Any]:
    def fn(patch: kopf.Patch, **_: Any) -> Outcome | None:
        memory = kopf_outcomes.recall()
        seen.append((memory.acted_on_this_state, memory.idempotency_key))
        return then(len(seen), patch)
    return fn


def operator(server: Server, *fns: Callable[..., Any], **options: Any) -> Operator:
    registry = kopf.OperatorRegistry()
    for index, fn in enumerate(fns):
        kopf.on.delete(*RESOURCE, registry=registry, id=f"h{index}" if len(fns) > 1 else "h", **options)(fn)
    return Operator(server, registry)


# --- a kill between the object's PATCH (the memory) and its /status PATCH -----------------------

@pytest.mark.parametrize("concludes", ["Success", "Pending"])
async def test_a_kill_between_the_memory_and_the_status_write_keeps_the_key_of_the_state_acted_on(
        server: Server, monkeypatch: pytest.MonkeyPatch, status_subresource: None, concludes: str) -> None:
    """Run 1 starts the side effect (key K), writes ``status.deletion.phase=requested`` and waits;
    run 2, on that state (K, acted), writes ``phase=done`` and succeeds (or writes and waits again:
    the same for any record, the kept Success's included). Kopf sends the object's merge-patch (the
    record, about the state with ``done``), then dies before ``/status``. The object shows the state
    run 2 acted on under K: the re-run must get K (once per state)."""
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["deletion"] = {"phase": "requested" if run == 1 else "done"}
        if run == 1 or concludes == "Pending":
            return Pending("waiting for the callback", recheck=60)
        return kopf_outcomes.Success()

    op = operator(server, recalling(seen, then))
    await op.event()
    assert server.body["status"]["deletion"] == {"phase": "requested"}
    server.age(61)
    killed = killed_before(server, monkeypatch, the_status_patch)
    with pytest.raises(Killed):
        await op.event()
    assert killed and server.body["status"]["deletion"] == {"phase": "requested"}  # the memory landed, not /status
    if not KOPF_138 and concludes == "Success":
        assert server.finalized  # Kopf 1.37: its finalizer went with the memory, before /status: no re-run
        return
    op.restart()
    await op.event()
    assert seen[0][1] == seen[1][1]  # the recheck: the same state, the same key
    assert seen[2][1] == seen[1][1], "the re-run on the state run 2 acted on got another key"
    assert server.finalized or concludes == "Pending"


def parked_writing(seen: Seen) -> Callable[..., Any]:
    """Starts its side effect where it did not act yet, writes its ``status.deletion``, and waits for a change."""
    def then(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["deletion"] = {"requested": True}
        return Pending("waiting for the callback")
    return recalling(seen, then)


async def test_a_kill_between_the_patches_leaves_a_parked_handler_parked_until_the_state_changes(
        server: Server, monkeypatch: pytest.MonkeyPatch, status_subresource: None) -> None:
    """The record's second digest (the state without the cycle's ``/status`` write, which the kill lost)
    is the state the object shows: the events after the restart are no change for the parked handler,
    which runs again only when a person changes the spec, as a state it did not act on (another key)."""
    seen: Seen = []
    op = operator(server, parked_writing(seen))
    killed = killed_before(server, monkeypatch, the_status_patch)
    with pytest.raises(Killed):
        await op.event()
    assert killed and "deletion" not in server.body.get("status", {})
    assert "before_status" in server.records()["h"]
    op.restart()
    await op.event()
    await op.event()
    assert len(seen) == 1  # the state it acted on: it stays parked
    server.body["spec"] = {"size": 2}
    await op.event()
    assert [acted for acted, _ in seen] == [False, False] and seen[1][1] != seen[0][1]
    assert not server.finalized


async def test_a_spec_change_between_the_patches_is_a_state_the_handler_did_not_act_on(
        server: Server, monkeypatch: pytest.MonkeyPatch, status_subresource: None) -> None:
    """Guard: a person changes the spec between Kopf's PATCH of the object (the record, with its two
    digests) and its ``/status`` PATCH, which lands. The object shows neither state of the record: the
    parked handler wakes, not as having acted, under another key."""
    seen: Seen = []
    op = operator(server, parked_writing(seen))
    sent = server.patch

    async def patch(*, payload: Any, url: str = "", **kwargs: Any) -> dict[str, Any]:
        if the_status_patch(url, payload):
            server.body["spec"] = {"size": 2}  # the person's write, in between
        return await sent(payload=payload, url=url, **kwargs)

    monkeypatch.setattr(one_object.api, "patch", patch)
    await op.event()
    assert server.body["status"]["deletion"] == {"requested": True} and server.body["spec"] == {"size": 2}
    monkeypatch.setattr(one_object.api, "patch", sent)
    await op.event()
    assert [acted for acted, _ in seen] == [False, False] and seen[1][1] != seen[0][1]


@pytest.mark.parametrize("field", ["digest", "before_status"])
async def test_a_record_with_an_unreadable_second_digest_is_garbage_as_with_an_unreadable_digest(
        server: Server, monkeypatch: pytest.MonkeyPatch, status_subresource: None, field: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """A record whose second digest is not a string (a typo, a newer version) is no record at all, as
    one whose digest is not: the memory is unreadable, said once; the parked handler concludes afresh
    (not as having acted), and the finalizer stays."""
    seen: Seen = []
    op = operator(server, parked_writing(seen))
    killed_before(server, monkeypatch, the_status_patch)
    with pytest.raises(Killed):
        await op.event()
    records = server.records()
    records["h"][field] = 5
    server.annotations[DEFAULT_KEYS.memory] = json.dumps(records)
    op.restart()
    await op.event()
    assert [acted for acted, _ in seen] == [False, False]
    assert any("unreadable handler memory" in record.message and "is malformed" in record.message
               for record in caplog.records)
    assert not server.finalized


async def test_a_recheck_that_writes_its_status_as_before_stores_nothing(server: Server) -> None:
    """The record's second digest stays while the record is about the same state: a recheck that
    writes the same status and concludes as before writes no memory (no PATCH of its own)."""
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["deletion"] = {"requested": True}
        return Pending("waiting for the callback", recheck=60)

    op = operator(server, recalling(seen, then))
    await op.event()
    await op.event()  # its own write's event
    kept = server.records()
    assert "before_status" in kept["h"]
    sent = len(server.sent)
    server.age(61)
    await op.event()
    assert [acted for acted, _ in seen] == [False, True] and len({key for _, key in seen}) == 1
    assert not any(DEFAULT_KEYS.memory in json.dumps(payload) for payload in server.sent[sent:])


async def test_a_kill_between_the_memory_and_the_status_write_of_a_first_run_keeps_its_key(
        server: Server, monkeypatch: pytest.MonkeyPatch, status_subresource: None) -> None:
    """Held up: a Success that was given its key in this run (made from the state it saw) and dies
    between the two PATCHes re-runs on that state, whose digest makes the same key."""
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["deletion"] = {"phase": "done"}
        return kopf_outcomes.Success()

    op = operator(server, recalling(seen, then))
    killed_before(server, monkeypatch, the_status_patch)
    with pytest.raises(Killed):
        await op.event()
    op.restart()
    await op.event()
    assert len({key for _, key in seen}) == 1
    assert server.finalized


# --- a kept Success record never holds a finalizer, nor reads as waiting -------------------------

async def test_a_kept_success_record_does_not_hold_the_finalizer_of_an_object_that_left_the_filters(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The deletion handler (``labels=``) writes its status and succeeds; the operator dies before
    the finalizer's removal, so the object keeps the kept Success record (``why``/``stuck`` show it
    succeeded, not waiting). The object is relabelled out of the handler's filter: Kopf releases
    ("no handlers requiring it"), and the Success record (not waiting) must not keep the finalizer
    (no object stranded)."""
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["deletion"] = {"done": True}
        return kopf_outcomes.Success()

    server.body["metadata"]["labels"] = {"example.com/shard": "a"}
    op = operator(server, recalling(seen, then), labels={"example.com/shard": "a"})
    killed_before(server, monkeypatch, the_finalizers_removal)
    with pytest.raises(Killed):
        await op.event()
    if KOPF_138:  # Kopf 1.37: the memory went unsent with the finalizer's removal
        assert server.records()["h"]["outcome"] == "success"
    assert held.waiting(server.body, FINALIZER) == []
    shown = report(Kind("kopf.dev", "v1", "kopfexamples", "KopfExample", namespaced=True), server.body)
    assert [handler["state"] for handler in shown["handlers"] if handler["id"] == "h"] in ([], ["succeeded"])
    server.body["metadata"]["labels"] = {"example.com/shard": "b"}
    op.restart()
    await op.event()
    assert server.finalized
    assert len(seen) == 1


async def test_a_kept_success_record_is_not_reported_as_waiting(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugins' per-cycle report (the Prometheus waiting gauge, the conditions plugin) names no
    handler whose memory is a kept Success."""
    reports: list[dict[str, str]] = []

    class Watcher:
        @kopf_outcomes.hookimpl
        def kopf_outcomes_observe_object(self, resource: Any, body: Any, waiting: Any) -> None:
            reports.append(dict(waiting))

    kopf_outcomes.install(entry_points=False, events=False, plugins=[Watcher()])
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["deletion"] = {"done": True}
        return kopf_outcomes.Success()

    op = operator(server, recalling(seen, then))
    killed_before(server, monkeypatch, the_finalizers_removal)
    with pytest.raises(Killed):
        await op.event()
    op.restart()
    await op.event()
    assert server.finalized
    assert reports and all(report == {} for report in reports)


# --- scope: a write outside the handler's state ------------------------------------------------

@pytest.mark.parametrize("scope", [{"ignore": ["status.deletion"]}, {"depends_on": ["spec"]}])
async def test_a_success_whose_write_is_ignored_keeps_no_record_and_its_key(
        server: Server, monkeypatch: pytest.MonkeyPatch, scope: dict[str, list[str]]) -> None:
    """Held up: with ``ignore=`` naming the written field (or ``depends_on`` leaving it out), the
    cycle leaves the state unchanged, so the record ends; the re-run after a kill gets the same key
    (made from the same digest)."""
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["deletion"] = {"done": run}
        return kopf_outcomes.Success()

    fn = kopf_outcomes.handler_options(**scope)(recalling(seen, then))
    op = operator(server, fn)
    killed = killed_before(server, monkeypatch, the_finalizers_removal)
    with pytest.raises(Killed):
        await op.event()
    assert killed
    assert "h" not in server.records()
    op.restart()
    await op.event()
    assert len({key for _, key in seen}) == 1
    assert server.finalized
    assert DEFAULT_KEYS.memory not in server.annotations or not server.records()


# --- a Success that writes nothing, after a run that wrote ---------------------------------------

async def test_a_kill_after_a_success_that_wrote_nothing_keeps_the_key_its_pending_wrote_under(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run 1 starts the side effect (key K), writes ``status.deletion`` and waits; run 2 (its recheck,
    the same state) writes nothing and succeeds; the operator dies before the finalizer's removal.
    The re-run sees the state run 2 concluded about: it must get K."""
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        if run == 1:
            patch.status["deletion"] = {"requested": True}
            return Pending("waiting for the callback", recheck=60)
        return kopf_outcomes.Success()

    op = operator(server, recalling(seen, then))
    await op.event()
    server.age(61)
    killed = killed_before(server, monkeypatch, the_finalizers_removal)
    with pytest.raises(Killed):
        await op.event()
    assert killed
    op.restart()
    await op.event()
    assert seen[1][1] == seen[0][1]  # the recheck: the same state, the same key
    assert seen[2][1] == seen[1][1], "the re-run on the state it acted on got another key"
    assert server.finalized


# --- a kept record and a later, real change of the state ----------------------------------------

async def test_a_kept_success_record_does_not_vouch_for_a_state_changed_since(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """Held up: h0 writes its status and succeeds (its record kept); h1 waits. A person changes the
    spec; h1's later cycles write (its refresh must not carry h0's record over a person's change). h1
    succeeds and the operator dies before the finalizer's removal: h0 runs again on the changed state,
    which it never acted on: acted_on_this_state False, a new key (its side effect starts for it)."""
    first: Seen = []
    second: Seen = []

    def h0(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["first"] = {"done": True}
        return kopf_outcomes.Success()

    def h1(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["second"] = {"run": run}
        return Pending("waiting for the callback", recheck=60) if run < 3 else kopf_outcomes.Success()

    op = operator(server, recalling(first, h0), recalling(second, h1))
    await op.event()
    assert server.records()["h0"]["outcome"] == "success"
    server.body["spec"] = {"size": 2}  # a person's change: a state h0 never saw
    await op.event()  # h1 wakes on it, writes again
    server.age(61)
    killed = killed_before(server, monkeypatch, the_finalizers_removal)
    with pytest.raises(Killed):
        await op.event()  # h1's recheck: it succeeds; the kill
    assert killed
    op.restart()
    await op.event()
    if KOPF_138:  # Kopf 1.37: nothing of the killed cycle landed, h0 is not run again
        assert len(first) == 2 and first[1][0] is False and first[1][1] != first[0][1]
    assert server.finalized


# --- a creation's kept record on a living object -------------------------------------------------

async def test_a_creations_kept_record_changes_nothing_of_a_later_stock_update(server: Server) -> None:
    """A create handler recalls, writes its status and succeeds: its record is kept on the living
    object (it never runs again on it). A later update's stock handler runs as in stock Kopf: once
    per change, and its cycle writes no memory (stock parity); the creation's record stays as it was."""
    server.body["metadata"].pop("deletionTimestamp")
    server.body["metadata"].pop("finalizers")  # no deletion handler: Kopf needs none
    seen: Seen = []
    updates: list[Any] = []

    def created(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["phase"] = "Ready"
        return kopf_outcomes.Success()

    def updated(patch: kopf.Patch, **_: Any) -> None:
        updates.append(server.body["spec"])
        patch.status["phase"] = "Updated"

    registry = kopf.OperatorRegistry()
    kopf.on.create(*RESOURCE, registry=registry, id="c")(recalling(seen, created))
    kopf.on.update(*RESOURCE, registry=registry, id="u")(updated)
    op = Operator(server, registry)
    await op.event()
    kept = server.records()
    assert kept["c"]["outcome"] == "success"
    sent = len(server.sent)
    server.body["spec"] = {"size": 2}
    await op.event()
    await op.event()
    assert updates == [{"size": 2}]
    assert not any(DEFAULT_KEYS.memory in str(payload) for payload in server.sent[sent:])
    assert server.records() == kept
    assert len(seen) == 1


# --- a sub-handler's Success ------------------------------------------------------------------

async def test_a_kill_after_a_successful_sub_handlers_own_write_keeps_its_key(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """As for a handler (new-own-write-kill), for a sub-handler: it recalls, writes its status and
    succeeds, the parent with it; the operator dies before the finalizer's removal. The re-run of the
    parent runs the sub-handler again on the state it acted on: the same key, and it knows it acted."""
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["deletion"] = {"requested": True}
        return kopf_outcomes.Success()

    def parent(**_: Any) -> None:
        kopf.subhandler(id="s")(recalling(seen, then))

    op = operator(server, parent)
    killed = killed_before(server, monkeypatch, the_finalizers_removal)
    with pytest.raises(Killed):
        await op.event()
    assert killed
    landed = "deletion" in server.body.get("status", {})
    op.restart()
    await op.event()
    await op.event()
    assert len(seen) == 2  # Kopf purged the parent's progress as the memory landed (1.37: nothing did)
    assert len({key for _, key in seen}) == 1
    assert seen[1][0] is landed
    assert server.finalized
