"""
The per-cycle context of one object: its memory (read once), which handlers are parked, which
must wake, and what ``recall()`` answers inside a handler.

Parking is marked, never inferred: a handler is parked by us when Kopf's own progress for it
carries :data:`PARKED_MARK` at the end of its message (we put it there, in the same PATCH as
the memory), and our memory's record of it says ``parked``. A stock handler with any delay has
neither, and Kopf treats it exactly as without kopf-outcomes.
"""
from __future__ import annotations

import contextvars
import dataclasses
import datetime
import types
from collections.abc import Collection, Mapping, MutableMapping
from collections.abc import Set as AbstractSet
from typing import Any

from kopf_outcomes import engine, memory
from kopf_outcomes._kopf import deadlines, dependents, requeue, unrecorded
from kopf_outcomes._kopf.internals import (
    Cause,
    Handler,
    HandlerId,
    HandlerState,
    OperatorSettings,
    OperatorWrites,
    State,
    cause_var,
    changing_ids,
    handler_var,
    kind_of,
    operator_registry,
    operator_writes,
    progress_of,
    raw_body_of,
    registered_ids,
    resource_deletion_ids,
    subsettings_var,
)
from kopf_outcomes._kopf.kopf_runs import body_of, options_of, resource_of
from kopf_outcomes._kopf.marks import HELD_MARK, PARKED_MARK, RETAINED_MARK, Held
from kopf_outcomes._kopf.states import before_status, digest, recorded_digest, recorded_scope, remembered, scope_of
from kopf_outcomes.errors import NotInstalledError
from kopf_outcomes.kinds import PERSISTING, Kind
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.memory import Memory, MemoryKeys, MemoryRecord
from kopf_outcomes.outcomes import Pending


class Cycle:
    """One reaction cycle of one object: the kind of its handlers (decided once, here), its
    memory, read once (only kinds whose progress Kopf persists have one), and its handlers,
    whose results in ``status`` are the operator's own writes (their ids are collected only for
    a digest). Made only by :func:`make`."""

    __slots__ = ("keys", "records", "handlers", "state", "kind", "persists", "settings", "children", "tracked",
                 "quiet", "objects", "unreadable", "recalled")
    keys: MemoryKeys
    records: Mapping[str, MemoryRecord]
    handlers: Collection[Handler]
    state: State | None
    kind: Kind
    persists: bool  # the kind's: only then a memory, parking, rechecks
    unreadable: bool  # the object has a memory of ours, and none of it could be read (or is the object's)
    settings: OperatorSettings
    # The four below are the shared, read-only NONE_YET or NO_IDS until the cycle's first write
    # (``own_*``): most cycles write none of them.
    # Parents some of whose unfinished sub-handlers wait for us: what the parent then waits for
    # (all of them: a Pending; only held ones Kopf retries: a Held; else the delay of Kopf's retry of the children).
    children: Mapping[str, Pending | Held | float]
    # The handlers with a memory in this cycle (and its sub-handlers' cycles), with the cycle each
    # belongs to, and whether it concluded now: at the end, their digests are of the object as
    # the cycle's patch leaves it (``refresh``).
    tracked: Mapping[str, tuple[Handler, Cycle, bool]]
    quiet: AbstractSet[str]  # rechecking handlers that concluded as before: nothing new to store
    recalled: AbstractSet[str]  # handlers given their idempotency key (``recall()``) in this cycle
    # The other objects of handlers with ``depends_on_objects`` (and their fingerprint), taken
    # before any handler of the cycle runs: what they see and conclude about.
    objects: Mapping[str, dependents.Taken]

    def __init__(self, settings: OperatorSettings, keys: MemoryKeys, kind: Kind, handlers: Collection[Handler],
                 state: State | None, records: Mapping[str, MemoryRecord], unreadable: bool) -> None:
        self.settings, self.keys, self.kind, self.handlers, self.state = settings, keys, kind, handlers, state
        self.persists = kind in PERSISTING
        self.records, self.unreadable = records, unreadable
        self.children = self.tracked = self.objects = NONE_YET
        self.quiet = self.recalled = NO_IDS

    @property
    def registry(self) -> Any:
        """Kopf's registry of the operator, where the object's worker knows it (read when a digest is)."""
        return operator_registry.get()

    def own_children(self) -> dict[str, Pending | Held | float]:
        children = self.children
        if not isinstance(children, dict):
            children = self.children = {}
        return children

    def own_tracked(self) -> dict[str, tuple[Handler, Cycle, bool]]:
        tracked = self.tracked
        if not isinstance(tracked, dict):
            tracked = self.tracked = {}
        return tracked

    def own_recalled(self) -> set[str]:
        recalled = self.recalled
        if not isinstance(recalled, set):
            recalled = self.recalled = set()
        return recalled

    def own_quiet(self) -> set[str]:
        quiet = self.quiet
        if not isinstance(quiet, set):
            quiet = self.quiet = set()
        return quiet

    @property
    def writes(self) -> OperatorWrites:
        """What the operator's Kopf storages write: never part of a state (read when a digest is)."""
        return operator_writes(self.settings)

    @property
    def handler_ids(self) -> set[str]:
        """Every handler whose result is the operator's write at ``status.<id>`` (its sub-handlers'
        at ``status.<id>/<sub id>``): each handler the operator registered, whatever Kopf's progress
        lists now (it purges a cause's records, not their results), and the cycle's own."""
        ids = {str(handler.id) for handler in self.handlers}
        if self.registry is not None:
            ids |= registered_ids(self.registry) | changing_ids(self.registry)
        return ids | {str(key) for key in self.state} if self.state is not None else ids


EMPTY: Mapping[str, Any] = {}  # an absent mapping, read without a branch
# What a cycle has none of yet: shared by every cycle, so read-only (a write by mistake raises).
NONE_YET: Mapping[str, Any] = types.MappingProxyType({})
NO_IDS: AbstractSet[str] = frozenset()
_cycle: contextvars.ContextVar[Cycle | None] = contextvars.ContextVar("kopf_outcomes_cycle", default=None)


class _KeysByFinalizer(dict[str | None, MemoryKeys]):
    """The memory's keys of an operator, by its finalizer (Kopf's public setting), each made once."""

    def __missing__(self, finalizer: str | None) -> MemoryKeys:
        if len(self) >= 64:  # an operator has one finalizer; tests and tools may make many
            self.clear()
        keys = self[finalizer] = memory.keys_for(finalizer)
        return keys


KEYS = _KeysByFinalizer()


def make(settings: OperatorSettings, cause: Cause, handlers: Collection[Handler],
         state: State | None = None) -> Cycle:
    """The context of a cycle: the handlers' kind decided, the object's memory read once (only kinds
    whose progress Kopf persists have one; most objects have none, and nothing is parsed for them)."""
    keys = KEYS[settings.persistence.finalizer]
    kind = kind_of(cause, handlers)
    records: Mapping[str, MemoryRecord] = NONE_YET
    unreadable = False
    body = raw_body_of(cause) if kind in PERSISTING else None
    annotations = (body.get("metadata") or EMPTY).get("annotations") if body is not None else None
    if body is not None and annotations and keys.memory in annotations:
        records = memory.own(memory.read(body, cause.logger, keys), body)
        unreadable = not records
    return Cycle(settings, keys, kind, handlers, state, records, unreadable)


def of(settings: OperatorSettings, cause: Cause, handler: Handler) -> Cycle:
    """The current cycle, or one made for this handler alone (see ``current``)."""
    return _cycle.get() or make(settings, cause, (handler,))


# The cycle's context. None only where Kopf's execute_handler_once is called without its
# execute_handlers_once: Kopf itself never does (daemons and timers go through it too), callers of
# Kopf's internals (and the overhead benchmark) may.
current = _cycle.get
# Make a cycle's context current (``enter(make(...))``), and ``end()`` it with the token that
# ``enter`` gave.
enter = _cycle.set
end = _cycle.reset


RETAINED_ONLY = (RETAINED_MARK,)


def is_parked(state: HandlerState, marks: tuple[str, ...] = (PARKED_MARK, RETAINED_MARK)) -> bool:
    """Parked by us: marked so in Kopf's own progress, and not finished."""
    message = state.message
    return message.__class__ is str and message.endswith(marks) and not state.finished


def is_held(state: HandlerState) -> bool:
    """Its last run was held by us (a fault, not the handler's): marked so in Kopf's progress."""
    message = state.message
    return message.__class__ is str and message.endswith(HELD_MARK) and not state.finished


def record_of(cycle: Cycle, handler_id: str, state: HandlerState | None) -> MemoryRecord | None:
    """The handler's record; a ``retained`` one counts only where Kopf's progress carries the
    retained mark too, so that a forged record can neither hold a handler nor release one that
    is not retained (a Pending handler's progress carries the parked mark, not this one)."""
    found = cycle.records.get(handler_id)
    if found is not None and found["outcome"] == "retained" and not (state is not None
                                                                    and is_parked(state, RETAINED_ONLY)):
        return None
    return found


def wakes(plugins: PluginManager, cycle: Cycle, handler: Handler, cause: Cause, state: HandlerState) -> bool:
    """Whether a handler that Kopf would skip must run now."""
    found = record_of(cycle, str(handler.id), state)
    if found is None:
        return is_parked(state)  # ours, with its memory lost or garbage: run it to conclude afresh
    body = raw_body_of(cause)
    if found["outcome"] == "retained":  # released by its own name, or by its retained sub-handler's
        if body is None:
            return False
        if memory.release_answers(body, str(handler.id), found, cycle.keys):
            return not release_waits(cycle, handler, cause, body, found)
        unanswered_release(cycle, handler, cause, body, found)
        return child_released(cycle, str(handler.id), body)
    if found["outcome"] == "pending" and body is not None and child_released(cycle, str(handler.id), body):
        return True  # our annotations are in no state: a release must wake the parent itself
    if found["outcome"] == "pending" and not state.finished and body is not None:
        about = unrecorded.done_here(str((body.get("metadata") or {}).get("uid") or ""), str(handler.id))
        if about:
            now = digest(plugins, cycle, handler, cause)
            if now in about:
                return True  # concluded for good here about this state, on an older view, its write refused
            return not memory.about(found, now) or dependents.moved(cycle.objects, handler, cause, found)
    if state.finished and not (found["outcome"] == "success" and options_of(plugins, handler, cause).remember):
        return False
    return (not memory.about(found, digest(plugins, cycle, handler, cause))
            or dependents.moved(cycle.objects, handler, cause, found))


def release_waits(cycle: Cycle, handler: Handler, cause: Cause, body: Mapping[str, Any], record: MemoryRecord) -> bool:
    """Whether a person's release of this retained handler waits for its retry (an observer failed on
    it), said once per retry: a deadline from another replica or a forged one would hold it silently.
    One further ahead than a retry sets it is garbage (:func:`.deadlines.far_ahead`): the release is
    attempted now, said at ERROR."""
    deadline = record.get("deadline")
    far, waits = deadlines.far_ahead(record), deadlines.retrying(record)
    said = (str((body.get("metadata") or EMPTY).get("uid") or ""), str(handler.id), str(deadline))
    if (far or waits) and said not in _SAID:
        if len(_SAID) >= 1024:
            _SAID.clear()
        _SAID.add(said)
        if far:
            cause.logger.error(f"The retry of the release of {handler} is due at {deadline}, further ahead than any "
                               f"retry is set (forged, or written by a clock far ahead): ignored, the release is "
                               f"attempted now.")
        else:
            cause.logger.warning(f"The release of {handler} by the annotation {cycle.keys.release!r} waits for its "
                                 f"retry at {deadline} (an observer failed on it); the finalizer is kept until then.")
    return waits


_SAID: set[tuple[str, str, str]] = set()  # the retries said to wait (uid, handler, deadline): once each


def unanswered_release(cycle: Cycle, handler: Handler, cause: Cause, body: Mapping[str, Any],
                       record: MemoryRecord) -> None:
    """A release that names this retained handler without its retention's stamp (the old form, ``*``,
    or another retention's stamp) cannot tell this retention from one it was not meant for: it is
    held, never released, and the ERROR says the value that releases it."""
    value = ((body.get("metadata") or {}).get("annotations") or {}).get(cycle.keys.release)
    if not memory.release_requested(body, str(handler.id), cycle.keys) or record.get("ignored_release") == value:
        return
    cause.logger.error(f"The release annotation {cycle.keys.release}={value!r} does not release {handler}: a "
                       f"release must carry the stamp of the retention it answers. To release it, annotate: "
                       f"{cycle.keys.release}={memory.release_value(str(handler.id), record)}")


def holds_retained_child(cycle: Cycle, parent_id: str) -> bool:
    """Whether a sub-handler of this parent (of any depth) retains the finalizer: the parent then
    holds it too, whatever ends the parent (a forged record can only keep a finalizer, never free one)."""
    prefix = f"{parent_id}/"
    return any(handler_id.startswith(prefix) and record["outcome"] == "retained"
               for handler_id, record in cycle.records.items())


def child_released(cycle: Cycle, parent_id: str, body: Mapping[str, Any]) -> bool:
    """Whether a person released a retained sub-handler of this parent (of any depth)."""
    return bool(released_children(cycle, parent_id, body))


def released_children(cycle: Cycle, parent_id: str, body: Mapping[str, Any]) -> dict[str, MemoryRecord]:
    """The retained sub-handlers of this parent (of any depth) that a person released, their retry come."""
    prefix = f"{parent_id}/"
    return {handler_id: record for handler_id, record in cycle.records.items()
            if handler_id.startswith(prefix) and record["outcome"] == "retained"
            and memory.release_answers(body, handler_id, record, cycle.keys) and not deadlines.retrying(record)}


def child_release_retried(cycle: Cycle, parent_id: str, body: Mapping[str, Any]) -> bool:
    """Whether the parent runs for a retained sub-handler's release retried (an observer failed on it),
    now due: a hold, not the parent's (like :class:`.marks.Held`), it spends none of its retries=/timeout=."""
    return any("deadline" in record for record in released_children(cycle, parent_id, body).values())


def release_stands(cycle: Cycle, handler_id: str, body: Mapping[str, Any], record: MemoryRecord) -> bool:
    """Whether a person's release of this retained handler stands (its own, or a retained sub-handler's)."""
    return memory.release_answers(body, handler_id, record, cycle.keys) or child_released(cycle, handler_id, body)


def records_as_patched(cycle: Cycle, patch: Mapping[str, Any]) -> Mapping[str, MemoryRecord]:
    """The object's memory as this cycle's patch leaves it."""
    pending = (patch.get("metadata") or EMPTY).get("annotations", EMPTY).get(cycle.keys.memory, _UNWRITTEN)
    return cycle.records if pending is _UNWRITTEN else memory.parse(pending) if pending else EMPTY


def release_answers_another(cycle: Cycle, body: Mapping[str, Any], patch: Mapping[str, Any], handler_id: str) -> bool:
    """Whether the release annotation still releases a retained handler other than this one, as the
    cycle's patch leaves the memory: ``*`` answers every handler retained when it was set, under any
    lifecycle (Kopf's default runs one handler per cycle), so it stays until the last of them goes."""
    return any(other != handler_id and record["outcome"] == "retained"
               and memory.release_answers(body, other, record, cycle.keys)
               for other, record in records_as_patched(cycle, patch).items())


def recheck_wait(plugins: PluginManager, cycle: Cycle, handler: Handler, cause: Cause,
                 now: datetime.datetime) -> float | None:
    """
    For a rechecking handler, the seconds until it is due by the memory's schedule (0: now);
    None for any other handler, and for one whose state changed (it wakes as usual).

    Kopf's stored delay of a rechecking handler is stale (quiet rechecks store nothing): the
    memory's grid decides when it is due (see :mod:`.requeue`).
    """
    found = cycle.records.get(str(handler.id))
    interval = requeue.recheck_of(found)
    if found is None or interval is None:
        return None
    # Just after this worker ran it (its own write's event comes within the tolerance): the next point.
    last = requeue.last_run(str(handler.id))
    just_ran = last is not None and (now - last).total_seconds() < interval / 2
    due = requeue.next_due(found, last, after=True, served=True) if just_ran and last is not None \
        else requeue.next_due(found, now)
    if due is None or not memory.about(found, digest(plugins, cycle, handler, cause)) \
            or dependents.moved(cycle.objects, handler, cause, found):
        return None
    wait = (due - now).total_seconds()
    return wait if wait > requeue.TOLERANCE else 0.0


def track(cycle: Cycle, handlers: Collection[Handler]) -> None:
    """The handlers of this cycle that have a memory and did not conclude now (parked ones)."""
    for handler in handlers:
        handler_id = str(handler.id)
        if handler_id in cycle.records and handler_id not in cycle.tracked:
            cycle.own_tracked()[handler_id] = (handler, cycle, False)


def refresh(plugins: PluginManager, cycle: Cycle, cause: Cause) -> None:
    """
    At the end of a cycle that writes to the object: every remembered digest is of the object as
    the cycle's patch leaves it. Of the handlers that concluded now (later handlers and observers
    of the cycle may have written more), and of those whose state had not changed before this
    cycle: what the operator writes, in any handler's cycle, is never a change for a parked one.
    Each digest is taken in the cycle of its handler (a sub-handler's results are its own). A
    conclusion that ends the handler's work (:data:`ENDS`) and kept its key (``concluding.keeps_key``)
    keeps its record only where the cycle writes into its state: a kill after that write and before
    the finalizer's removal runs it again on that state, which its record says it acted on; else it
    ends its record, as ever.
    """
    body, patch = raw_body_of(cause), getattr(cause, "patch", None)
    if body is None or not patch:
        return
    records = records_as_patched(cycle, patch)
    for handler_id, (handler, own, concluded) in cycle.tracked.items():
        record = records.get(handler_id)
        if record is None or (not concluded and not memory.about(record, digest(plugins, own, handler, cause))):
            continue  # gone, or its state changed before this cycle: it wakes as it should
        state_digest = remembered(plugins, own, handler, cause)
        if concluded and unwritten_end(plugins, own, handler, cause, record, state_digest):
            forget(cycle, body, patch, handler_id, cause)
        elif record["digest"] != state_digest:  # about the state the cycle leaves: it stays as it is
            rewrite(cycle, body, patch, cause, handler_id, record, state_digest,
                    before_status(plugins, own, handler, cause, state_digest))
    refresh_unrun_children(plugins, cycle, cause, records)


def refresh_unrun_children(plugins: PluginManager, cycle: Cycle, cause: Cause,
                           records: Mapping[str, MemoryRecord]) -> None:
    """The records of sub-handlers (of any depth) of this cycle's handlers that no run of the cycle
    tracked: their parent was not run (Kopf waits for a child's retry), so they are not at hand. The
    cycle's writes are no change for them either: each record about the state before the cycle is
    made about the state the cycle leaves, in the scope it stores (its handler's, as it concluded)."""
    body, patch = raw_body_of(cause), getattr(cause, "patch", None)
    parents = tuple(f"{handler.id}/" for handler in cycle.handlers)
    if body is None or not patch or not parents:
        return
    for handler_id, record in records.items():
        if handler_id in cycle.tracked or not handler_id.startswith(parents):
            continue
        before = recorded_digest(plugins, cycle, cause, record)
        if before is None or not memory.about(record, before):
            continue  # its scope is unknown, or its state changed before this cycle: it wakes as it should
        after = recorded_digest(plugins, cycle, cause, record, patched=True)
        if after is not None and after != record["digest"]:
            unsent = recorded_digest(plugins, cycle, cause, record, patched=True, status=False) \
                if "status" in patch else None
            rewrite(cycle, body, patch, cause, handler_id, record, after, unsent if unsent != after else None)


def rewrite(cycle: Cycle, body: Mapping[str, Any], patch: MutableMapping[str, Any], cause: Cause, handler_id: str,
            record: MemoryRecord, state_digest: str, unsent: str | None) -> None:
    """The record made about the state the cycle's patch leaves (``state_digest``), and that state
    without its write into ``status`` (``unsent``: None where it is the same)."""
    new = memory.MemoryRecord(**{**record, "digest": state_digest})
    new.pop("before_status", None)
    if unsent is not None:
        new["before_status"] = unsent
    memory.write(body, patch, handler_id, new, cause.logger, cycle.keys, known=cycle.records)


_UNWRITTEN = object()


# The conclusions that end a handler's work on its state: a Success, and a Fatal that lets its finalizer
# go (the rules', or a person's release of a retention). Their record is no retention and holds nothing
# (``held.WAITING``); it is kept, not remembered, only where their cycle writes into the state (``refresh``).
ENDS = frozenset({"success", "fatal"})


def unwritten_end(plugins: PluginManager, cycle: Cycle, handler: Handler, cause: Cause, record: MemoryRecord,
                  state_digest: str | None = None) -> bool:
    """Whether the record is one that ends the handler's work (:data:`ENDS`, not remembered) whose cycle
    wrote nothing into its state (``state_digest``: the state as the cycle's patch leaves it, if known):
    it goes."""
    if record["outcome"] not in ENDS or options_of(plugins, handler, cause).remember:
        return False
    patched = state_digest if state_digest is not None else digest(plugins, cycle, handler, cause, patched=True)
    if patched != digest(plugins, cycle, handler, cause):
        return False
    # Its key made from an earlier state (before a Pending's own write): a run after a kill, with no
    # record, would get another. It goes only where the state as it is would give the same key.
    key = record.get("key")
    return key is None or key == fresh_key(cycle, handler, cause, patched)


def fresh_key(cycle: Cycle, handler: Handler, cause: Cause, state_digest: str) -> str:
    """The idempotency key of a state with no record to carry one: its object, handler and state,
    the handler's other objects included."""
    uid = str(((body_of(cause) or EMPTY).get("metadata") or EMPTY).get("uid", ""))
    taken = cycle.objects.get(str(handler.id))
    return memory.idempotency_key(uid, str(handler.id), state_digest + (taken[1] if taken is not None else ""))


def forget(cycle: Cycle, body: Mapping[str, Any], patch: MutableMapping[str, Any], handler_id: str,
           cause: Cause) -> None:
    """The handler's record goes from the patch; where the memory is then as the object shows it,
    the patch writes no memory at all, as it would not have without the record (on a stale view, a
    write of it would remove records that the view does not show: a retention among them)."""
    memory.write(body, patch, handler_id, None, cause.logger, cycle.keys, known=cycle.records)
    metadata: dict[str, Any] = patch.get("metadata") or {}
    annotations: dict[str, Any] = metadata.get("annotations") or {}
    shown = ((body.get("metadata") or EMPTY).get("annotations") or EMPTY).get(cycle.keys.memory)
    if cycle.keys.memory in annotations and annotations[cycle.keys.memory] == shown:
        del annotations[cycle.keys.memory]
        if not annotations:
            del metadata["annotations"]
            if not metadata:
                del patch["metadata"]


def discard_unreadable(cycle: Cycle, cause: Cause) -> None:
    """
    A memory none of which is the object's (unreadable, or written for another uid), in a cycle
    whose handlers ran: each handler of the cycle it could be about concludes afresh (a parked one
    is woken to), so it goes in this PATCH unless the cycle wrote the memory anew; left, it would
    hold the finalizer once the handlers are done (an unreadable memory holds: :mod:`.held`). A
    deletion handler that no longer matches the object (relabelled out of its ``labels=``) never
    runs to conclude afresh: where Kopf's progress says it began and did not finish, it may wait,
    so the memory written instead says it is pending (it holds the finalizer, and names it); where
    that cannot be told, the memory stays as it is, neither removed nor replaced.
    """
    body, patch = raw_body_of(cause), getattr(cause, "patch", None)
    if body is None or patch is None:
        return
    written = (patch.get("metadata") or EMPTY).get("annotations") or EMPTY
    unmatched = _unfinished_unmatched(cycle, cause)
    if unmatched is None:
        if cycle.keys.memory in written:
            del patch["metadata"]["annotations"][cycle.keys.memory]
        return
    uid = str((body.get("metadata") or EMPTY).get("uid") or "")
    for handler_id in unmatched:
        unknown = memory.record(None, digest="", outcome="pending", reason="its memory was unreadable", parked=True,
                                depends_on=None, uid=uid)
        memory.write(body, patch, handler_id, unknown, cause.logger, cycle.keys, known=EMPTY)
    written = (patch.get("metadata") or EMPTY).get("annotations") or EMPTY
    if cycle.keys.memory not in written:
        patch.setdefault("metadata", {}).setdefault("annotations", {})[cycle.keys.memory] = None


def _unfinished_unmatched(cycle: Cycle, cause: Cause) -> list[str] | None:
    """The deletion handlers of the resource that do not match the object now and have begun and
    not finished in Kopf's progress (a Pending one of ours is such); None: unknown."""
    resource, kopf_body = getattr(cause, "resource", None), getattr(cause, "body", None)
    if cycle.registry is None or resource is None or kopf_body is None:
        return None
    matching = {str(handler.id) for handler in cycle.handlers}
    storage = cycle.settings.persistence.progress_storage
    found = []
    for handler_id in sorted(resource_deletion_ids(cycle.registry, resource) - matching):
        try:
            progress = storage.fetch(key=HandlerId(handler_id), body=kopf_body)
        except Exception:  # noqa: BLE001 - a storage of the user's: unknown
            return None
        if progress is not None and not (progress.get("success") or progress.get("failure")):
            found.append(handler_id)
    return found


def prune(cycle: Cycle, cause: Cause) -> None:
    """
    Where this cycle writes the memory anyway: the records of handlers the operator no longer has
    (renamed, removed from the code) go. Kopf runs no handler it does not have, so nothing could
    conclude them, and a retained one holds no finalizer (Kopf releases it when the handlers it has
    are done). Sub-handlers (``parent/child``) stay with their parent; ``remember=True`` records of
    handlers the operator has stay, as they must.
    """
    body, patch = raw_body_of(cause), getattr(cause, "patch", None)
    if cycle.registry is None or body is None or not patch:
        return
    pending = (patch.get("metadata") or {}).get("annotations", {}).get(cycle.keys.memory)
    if not pending:
        return
    known = changing_ids(cycle.registry) | {str(handler.id) for handler in cycle.handlers}
    for handler_id in memory.parse(pending):
        if handler_id not in known and not any(handler_id.startswith(f"{parent}/") for parent in known):
            memory.write(body, patch, handler_id, None, cause.logger, cycle.keys, known=cycle.records)


# The reasons of change causes whose handlers Kopf persists (not admission, not informational).
_CHANGE_REASONS = frozenset({"create", "update", "delete", "resume"})


def observe_object(plugins: PluginManager, cycle: Cycle, handlers: Collection[Handler], cause: Cause,
                   state: State) -> None:
    """Tell plugins which handlers of this object wait, from the memory and Kopf's progress, on
    every cycle of a change cause: parked objects are not re-run after a restart, but seen here."""
    body = body_of(cause)
    reason = getattr(getattr(cause, "reason", None), "value", None)
    if body is None or reason not in _CHANGE_REASONS:
        return
    waiting: dict[str, str] = {}
    for handler in handlers:
        handler_state = progress_of(state, handler)
        if handler_state.finished:
            continue
        found = record_of(cycle, str(handler.id), handler_state)
        if found is not None and found["outcome"] in ("pending", "retained"):
            waiting[str(handler.id)] = found["outcome"]
        elif handler_state.retries:
            waiting[str(handler.id)] = "retrying"
    resource = resource_of(cause)
    engine.guarded(plugins, cause.logger, "kopf_outcomes_observe_object",
                   lambda: plugins.hook.kopf_outcomes_observe_object(resource=resource, body=body, waiting=waiting),
                   None)


def current_memory(plugins: PluginManager | None) -> Memory:
    """For :func:`kopf_outcomes.recall`: the running handler's memory, as Kopf set the context."""
    try:
        handler, cause = handler_var.get(), cause_var.get()
    except LookupError:
        raise NotInstalledError("kopf_outcomes.recall() works only inside a handler") from None
    if body_of(cause) is None or plugins is None:
        raise NotInstalledError("kopf_outcomes.recall() works only inside a handler of an object, "
                                "with kopf_outcomes.install() done")
    cycle = of(subsettings_var.get(), cause, handler)
    cycle.own_recalled().add(str(handler.id))  # its key is given out: a failure keeps it (concluding.remember)
    return memory_of(plugins, cycle, handler, cause)


def memory_of(plugins: PluginManager, cycle: Cycle, handler: Handler, cause: Cause) -> Memory:
    """
    The handler's memory in this run: its record, whether that was about the state it sees now, and
    the idempotency key. The key is the one the record carries while the state is the one it acted
    on (so the handler's own writes, Kopf's and an upgrade's change of its scope keep it), else
    made from the state as the run sees it (before this cycle's patch): ``recall()`` and the record
    the run then writes agree.
    """
    handler_id = str(handler.id)
    state_digest = digest(plugins, cycle, handler, cause)
    previous = cycle.records.get(handler_id)
    now = scope_of(plugins, handler, cause) if previous is not None else None
    scope = recorded_scope(previous, now) if previous is not None and now is not None else None
    rescoped = None
    if scope is not None and scope != now:  # an upgrade changed it
        rescoped = digest(plugins, cycle, handler, cause, scope=scope)
    taken = cycle.objects.get(handler_id)
    key = fresh_key(cycle, handler, cause, state_digest)
    if taken is None:
        found = Memory(previous=previous, digest=state_digest, idempotency_key=key,
                       objects=dependents.unknown_objects(cycle.kind, handler), previous_scope_digest=rescoped)
    else:
        refs, fingerprint = taken
        found = Memory(previous=previous, digest=state_digest, idempotency_key=key,
                       objects=refs, objects_digest=fingerprint,
                       previous_objects_digest=dependents.previous(cause, handler_id, previous),
                       previous_scope_digest=rescoped)
    # The stored key vouches only for the state the record was written about: its own objects too.
    kept = previous.get("key") if previous is not None and previous.get("objects") == found.objects_digest else None
    return dataclasses.replace(found, idempotency_key=kept) if kept and found.about_this_state else found
