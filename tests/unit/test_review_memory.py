"""
An adversarial review of issue 42's once-per-state memory (main 61266e7..873d19b), through Kopf's
real processing of one object's events (:mod:`.one_object`). Each test states a promise of
docs/safety.md or docs/memory.md; a test marked ``xfail(strict=True)`` is one the code breaks
(its reason says how), the others are guards that it holds.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import Fatal, Outcome, Pending, Retry
from kopf_outcomes.memory import DEFAULT_KEYS
from tests.unit.one_object import RELEASES_BEFORE_THE_MEMORY, Operator, Server, server
from tests.unit.releases import stamped
from tests.unit.test_once_per_state import operator, waiting

__all__ = ["server"]

RESOURCE = ("kopf.dev", "v1", "kopfexamples")
Seen = list[tuple[bool, str]]  # per run: acted_on_this_state, idempotency_key


@pytest.fixture(autouse=True)
def installed(unpatched: None) -> Iterator[None]:
    kopf_outcomes.install(entry_points=False, events=False)
    yield


def retained(name: str, runs: list[str]) -> Callable[..., Outcome]:
    def fn(**_: Any) -> Outcome:
        runs.append(name)
        return Fatal("the external system refused", on_delete="retain")
    return fn


class AsapOperator(Operator):
    """Kopf's default lifecycle, ``asap``: one handler per cycle, as ``kopf run`` has it."""

    lifecycle = staticmethod(kopf.lifecycles.asap)


# --- Once per state: another operator's status storage, as Kopf leaves it -----------------------

async def test_another_operators_progress_emptied_when_it_is_done_keeps_the_key(server: Server) -> None:
    """Operator B (``StatusProgressStorage(name="b-op")``) runs and finishes: Kopf purges each of
    its handlers' records with a merge-patch null, which leaves ``status.b-op.progress: {}``
    (as the API server stores it; ``kubectl get`` shows ``progress: {}`` on every such object)."""
    seen: Seen = []
    op = operator(server, waiting(seen))
    await op.event()
    server.body.setdefault("status", {})["b-op"] = {"progress": {"b_fn": {"started": "2026-12-04T00:00:00",
                                                                          "retries": 1, "message": "down"}}}
    await op.event()  # B works: its bookkeeping
    server.body["status"]["b-op"]["progress"] = {}  # B is done: Kopf purged its record
    await op.event()
    server.age(61)
    await op.event()  # the recheck
    assert seen == [(False, seen[0][1]), (True, seen[0][1])]


async def test_another_operators_progress_while_it_works_keeps_the_key(server: Server) -> None:
    """Guard: B's bookkeeping while it works (records in Kopf's shape) neither wakes nor re-keys."""
    seen: Seen = []
    op = operator(server, waiting(seen))
    await op.event()
    server.body.setdefault("status", {})["b-op"] = {"progress": {"b_fn": {"started": "2026-12-04T00:00:00",
                                                                          "retries": 1, "message": "down"}}}
    await op.event()
    server.age(61)
    await op.event()
    assert seen == [(False, seen[0][1]), (True, seen[0][1])]


# --- Once per state: the handler's own write in a Retry before any conclusion -------------------

async def test_a_retry_after_the_handlers_own_write_keeps_the_key(server: Server) -> None:
    """memory.md: a Retry about a state no conclusion was about keys "that state's, the same on
    each retry"; and the handler's own write through Kopf's patch never changes its key."""
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["deletion"] = {"requested": True}  # the side effect started: say so
        return Retry("the callback's service is down", delay=1) if run == 1 else Pending("waiting", recheck=60)

    op = operator(server, waiting(seen, then))
    await op.event()  # it starts the side effect, writes, and fails
    assert server.body["status"]["deletion"] == {"requested": True}
    server.age(61)
    await op.event()  # the retry: the same state, but for its own write
    assert len(seen) == 2
    assert seen[0][1] == seen[1][1]


# --- Once per state: an upgrade from the version before records carried `ignore` -------------

async def test_a_record_from_before_ignore_was_stored_is_about_the_state_it_acted_on(server: Server) -> None:
    seen: Seen = []
    server.body["status"] = {"phase": "Terminating"}
    op = operator(server, kopf_outcomes.handler_options(ignore=["status.phase"])(waiting(seen)))  # type: ignore[arg-type]
    await op.event()
    records = server.records()  # as the previous version wrote it: no ignore, key or uid
    for field in ("ignore", "key", "uid"):
        records["h"].pop(field, None)
    server.annotations[DEFAULT_KEYS.memory] = json.dumps(records)
    op.restart()  # the upgraded operator
    server.age(61)
    await op.event()  # the recheck, on the very state it acted on
    assert seen == [(False, seen[0][1]), (True, seen[0][1])]


async def test_a_record_from_before_key_was_stored_keeps_the_key_of_its_state(server: Server) -> None:
    """Guard: a record of the previous version without ``ignore=`` in play is about its state."""
    seen: Seen = []
    op = operator(server, waiting(seen))
    await op.event()
    records = server.records()
    for field in ("key", "uid"):
        records["h"].pop(field, None)
    server.annotations[DEFAULT_KEYS.memory] = json.dumps(records)
    op.restart()
    server.age(61)
    await op.event()
    assert seen == [(False, seen[0][1]), (True, seen[0][1])]


# --- Fail closed: an unreadable memory, removed by a cycle in which another handler ran --------

def two_shards_of_handlers(server: Server, seen: Seen) -> Operator:
    """h0 matches shard a only and waits for a callback; h1 matches every object and waits for
    ``status.go``."""
    registry = kopf.OperatorRegistry()
    kopf.on.delete(*RESOURCE, registry=registry, id="h0", labels={"shard": "a"})(
        waiting(seen, lambda run, patch: Pending("waiting for the callback")))

    def h1(status: dict[str, Any], **_: Any) -> Outcome | None:
        return None if status.get("go") == "yes" else Pending("waiting for go")
    kopf.on.delete(*RESOURCE, registry=registry, id="h1")(h1)
    return Operator(server, registry)


@RELEASES_BEFORE_THE_MEMORY
@pytest.mark.parametrize("unreadable", [
    False,
    True,
])
async def test_an_unreadable_memory_keeps_a_wait_of_a_handler_that_cannot_run(server: Server, unreadable: bool) -> None:
    """memory.md: an unreadable memory "never releases a finalizer". h0 waits for its callback;
    the object leaves h0's filters; h1, which still matches, finishes in the same cycle."""
    seen: Seen = []
    server.body["metadata"]["labels"] = {"shard": "a"}
    op = two_shards_of_handlers(server, seen)
    await op.event()
    assert {record["outcome"] for record in server.records().values()} == {"pending"}
    server.body["metadata"]["labels"] = {"shard": "b"}  # it left h0's filters mid-deletion
    server.body["status"] = {"go": "yes"}  # h1's condition
    if unreadable:  # a typo
        server.annotations[DEFAULT_KEYS.memory] = server.annotations[DEFAULT_KEYS.memory][:-1]
    await op.event()
    await op.event()
    assert len(seen) == 1  # h0 never ran again: its callback has not come
    assert not server.finalized


# --- A release answers one retention: `*` with several retained handlers -------------------------

async def test_a_star_releases_every_handler_retained_at_the_time_under_kopfs_default_lifecycle(
        server: Server) -> None:
    """retain-finalizer.md: ``*`` releases "all handlers of the object retained now"."""
    runs: list[str] = []
    registry = kopf.OperatorRegistry()
    for name in ("h0", "h1"):
        kopf.on.delete(*RESOURCE, registry=registry, id=name)(retained(name, runs))
    op = AsapOperator(server, registry)
    for _ in range(3):
        await op.event()
    assert {record["outcome"] for record in server.records().values()} == {"retained"}
    assert len(server.records()) == 2 and not server.finalized
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "h0", "h1")  # both, retained now
    for _ in range(4):
        await op.event()
    assert server.finalized


async def test_a_star_releases_every_handler_retained_at_the_time(server: Server) -> None:
    """Guard: the same with every handler in one cycle (``all_at_once``)."""
    runs: list[str] = []
    op = operator(server, retained("h0", runs), retained("h1", runs))
    await op.event()
    assert len(server.records()) == 2
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "h0", "h1")
    await op.event()
    await op.event()
    assert server.finalized and runs == ["h0", "h1"]


# --- Fail closed: a handler mid-retry after its Pending, on an object that leaves the filters ----

@RELEASES_BEFORE_THE_MEMORY
async def test_a_handler_retrying_after_its_pending_holds_an_object_that_left_the_filters(server: Server) -> None:
    """safety.md: the finalizer stays while a deletion handler "waits in its memory (Pending, or a
    retained Fatal)". A Pending that then retries has acted on the state and is still waiting."""
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        return Retry("the callback's service is down", delay=600) if run == 2 else Pending("waiting", recheck=60)

    server.body["metadata"]["labels"] = {"shard": "a"}
    op = operator(server, waiting(seen, then), labels={"shard": "a"})
    await op.event()  # Pending: the side effect started
    server.age(61)
    await op.event()  # the recheck retries
    assert server.records()["h"]["outcome"] == "retry"
    server.body["metadata"]["labels"] = {"shard": "b"}  # it left the filters mid-deletion
    await op.event()
    assert not server.finalized


@RELEASES_BEFORE_THE_MEMORY
async def test_a_pending_handler_holds_an_object_that_left_the_filters(server: Server) -> None:
    """Guard: the same without the Retry holds."""
    seen: Seen = []
    server.body["metadata"]["labels"] = {"shard": "a"}
    op = operator(server, waiting(seen), labels={"shard": "a"})
    await op.event()
    server.body["metadata"]["labels"] = {"shard": "b"}
    await op.event()
    assert not server.finalized


# --- A release answers one retention: set while the handler runs, before the retention exists ----

async def test_a_release_set_while_the_handler_runs_answers_no_retention(server: Server) -> None:
    """retain-finalizer.md: "A release answers the retention you saw, and only it"; one set while the
    handler runs (after Kopf read the object, before the PATCH that retains) is not in the body the
    operator read, and carries no stamp of that retention: it releases none of it."""
    def fn(**_: Any) -> Outcome:
        server.annotations[DEFAULT_KEYS.release] = "h"  # a person's annotate, landing mid-run
        return Fatal("the external system refused", on_delete="retain")

    op = operator(server, fn)
    await op.event()  # retained; the annotation was there before the retention's PATCH
    await op.event()
    assert not server.finalized


async def test_a_star_that_releases_one_handler_ignores_one_retained_in_the_same_cycle(server: Server) -> None:
    """Guard: h0 retained, a person sets ``*``; in the cycle that releases h0, h1 becomes retained:
    ``*`` answered h0 only (it is a leftover for h1), and h1 holds."""
    runs: list[str] = []

    def h1(status: dict[str, Any], **_: Any) -> Outcome:
        runs.append("h1")
        return Fatal("refused too", on_delete="retain") if status.get("go") else Pending("waiting for go")

    op = operator(server, retained("h0", runs), h1)
    await op.event()
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "h0")
    server.body["status"] = {"go": True}
    await op.event()
    await op.event()
    assert server.records()["h1"]["outcome"] == "retained"
    assert DEFAULT_KEYS.release not in server.annotations and not server.finalized


# --- Once per state: a changed state read as acted on, after an upgrade that widens the scope ----

@pytest.mark.parametrize("old", [{"depends_on": ["spec.size"]}, {"ignore": ["spec.color"]}])
async def test_an_upgrade_that_widens_the_scope_compares_in_the_records_scope_and_says_so(
        server: Server, old: dict[str, list[str]]) -> None:
    """memory.md's rule: a record vouches only for the scope it was made in. After an upgrade that
    widens it, the comparison stays in that scope (the side effect is not started twice for a state
    it acted on), and ``previous_scope_digest`` says so: a change outside it made before the upgrade
    (blue) is not seen, and a handler for which that matters can tell."""
    seen: list[tuple[bool, str | None]] = []

    def version() -> Callable[..., Outcome]:
        def fn(**_: Any) -> Outcome:
            memory = kopf_outcomes.recall()
            seen.append((memory.acted_on_this_state, memory.previous_scope_digest))
            return Pending("waiting for the callback", recheck=60)
        return fn

    server.body["spec"] = {"size": 1, "color": "red"}
    before = operator(server, kopf_outcomes.handler_options(**old)(version()))  # type: ignore[arg-type]
    await before.event()  # it acted on size 1, red
    server.body["spec"]["color"] = "blue"  # outside the old scope: the old version rightly sleeps on
    after = operator(server, version())  # the new version depends on the colour too
    server.age(61)
    await after.event()  # its recheck
    assert seen[0] == (False, None)
    assert seen[1][0] is True and seen[1][1] is not None  # compared in the record's scope, and said so


# --- Once per state: sub-handlers ------------------------------------------------------------

async def test_a_sub_handlers_retry_after_its_pending_keeps_its_record(server: Server) -> None:
    """Finding 1 for a sub-handler: its record (``parent/child``) survives its Retry."""
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        return Retry("down", delay=1) if run == 2 else Pending("waiting for the callback", recheck=60)

    def parent(**_: Any) -> None:
        kopf.register(waiting(seen, then), id="child")

    op = operator(server, parent)
    await op.event()
    server.age(61)
    await op.event()
    server.age(61)
    await op.event()
    assert [acted for acted, _ in seen] == [False, True, True]
    assert len({key for _, key in seen}) == 1
    assert not server.finalized


async def test_another_real_kopf_operator_that_finishes_keeps_the_key(server: Server) -> None:
    """The same with operator B as Kopf runs it: its own finalizer, ``StatusProgressStorage(name="b-op")``,
    a deletion handler that retries once, then succeeds; Kopf purges its progress. (On the local
    kube-apiserver, a merge-patch null of the last record leaves ``"b-op": {"progress": {}}``, checked
    by hand with kubectl.)"""
    seen: Seen = []
    server.body["metadata"]["finalizers"].append("b-op.example.com/finalizer")
    a = operator(server, waiting(seen))
    b_runs: list[int] = []

    def b_fn(**_: Any) -> None:
        b_runs.append(1)
        if len(b_runs) == 1:
            raise kopf.TemporaryError("B's service is down", delay=0)

    b_registry = kopf.OperatorRegistry()
    kopf.on.delete(*RESOURCE, registry=b_registry, id="b_fn")(b_fn)
    b = Operator(server, b_registry)
    b.settings.persistence.finalizer = "b-op.example.com/finalizer"
    b.settings.persistence.progress_storage = kopf.StatusProgressStorage(name="b-op")
    await a.event()  # A waits for its callback
    await b.event()  # B retries: its bookkeeping in status.b-op.progress
    await a.event()
    await b.event()  # B succeeds: Kopf purges its progress, and B removes its finalizer
    assert server.body["status"]["b-op"] == {"progress": {}}
    await a.event()
    server.age(61)
    await a.event()  # A's recheck
    assert seen == [(False, seen[0][1]), (True, seen[0][1])]


# --- Once per state: the handler's own status write, lost to the API server's pruning -----------

class PruningServer(Server):
    """An API server whose CRD's structural schema has no ``status.deletion``: it drops it silently."""

    async def patch(self, *, payload: Any, **kwargs: Any) -> dict[str, Any]:
        if isinstance(payload, dict):
            payload = copy.deepcopy(payload)
            (payload.get("status") or {}).pop("deletion", None)
        return await Server.patch(self, payload=payload, **kwargs)


async def test_an_own_write_that_the_api_server_prunes_does_not_restart_the_side_effect(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.unit.kopf_objects import api
    pruning = PruningServer(server.body)
    monkeypatch.setattr(api, "patch", pruning.patch)
    seen: Seen = []

    def then(run: int, patch: kopf.Patch) -> Outcome:
        patch.status["deletion"] = {"requested": True}
        return Pending("waiting for the callback")  # parked: only a change wakes it

    op = operator(pruning, waiting(seen, then))
    for _ in range(6):
        await op.event()  # the first, then the events of its own PATCHes: nothing of the state changed
    assert "deletion" not in pruning.body.get("status", {})
    assert [acted for acted, _ in seen] == [False]


# --- The status-storage shape heuristic and a user's own field --------------------------------

def backup_done(status: dict[str, Any], **_: Any) -> Outcome | None:
    """Waits until the backup controller says every volume is copied."""
    volumes = (status.get("backup") or {}).get("progress") or {}
    if volumes and all(volume.get("success") for volume in volumes.values()):
        return None
    return Pending("waiting for the backup")


async def test_a_users_own_kopf_shaped_progress_field_is_no_state_in_the_default_scope(server: Server) -> None:
    """The documented trade-off (memory.md): a field of the user's with Kopf's storage names and
    shapes (``status.<x>.progress`` of ``{name: {message, success}}``) is read as another operator's
    bookkeeping, so its change does not wake the parked handler in the default scope; the way out,
    naming it in ``depends_on``, is the test below."""
    server.body["status"] = {"backup": {"progress": {"volume-1": {"message": "copying"}}}}
    op = operator(server, backup_done)
    await op.event()
    assert server.records()["h"]["outcome"] == "pending"
    server.body["status"]["backup"]["progress"]["volume-1"] = {"message": "copied", "success": True}
    await op.event()
    assert not server.finalized and server.records()["h"]["outcome"] == "pending"


async def test_a_users_own_progress_field_named_in_depends_on_wakes_the_handler(server: Server) -> None:
    """Guard: the documented way out, ``depends_on`` naming it, works."""
    server.body["status"] = {"backup": {"progress": {"volume-1": {"message": "copying"}}}}
    op = operator(server, kopf_outcomes.handler_options(depends_on=["status.backup.progress"])(backup_done))
    await op.event()
    server.body["status"]["backup"]["progress"]["volume-1"] = {"message": "copied", "success": True}
    await op.event()
    assert server.finalized


async def test_a_star_is_not_eaten_by_a_handler_retained_before_the_released_one_runs(server: Server) -> None:
    """retain-finalizer.md: ``*`` releases "what is retained when the operator reads it"."""
    runs: list[str] = []

    def a(status: dict[str, Any], **_: Any) -> Outcome:
        runs.append("a")
        return Fatal("refused too", on_delete="retain") if status.get("go") else Pending("waiting for go")

    registry = kopf.OperatorRegistry()
    kopf.on.delete(*RESOURCE, registry=registry, id="a")(a)
    kopf.on.delete(*RESOURCE, registry=registry, id="b")(retained("b", runs))
    op = AsapOperator(server, registry)
    await op.event()
    await op.event()
    assert server.records()["b"]["outcome"] == "retained" and server.records()["a"]["outcome"] == "pending"
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "b")  # b, the one retained now
    server.body["status"] = {"go": True}  # meanwhile a's condition comes
    for _ in range(3):
        await op.event()
    assert "b" not in server.records()  # b released
