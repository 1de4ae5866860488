"""
The per-cycle context of one object (:class:`Cycle`, the one name for it everywhere): the
handlers' kind, its memory (read once), and which handlers are parked or held by us. What a
cycle decides with it is in the modules beside: :mod:`.waiting` (who runs), :mod:`.retentions`
(which releases answer), :mod:`.refreshing` (the memory as the patch leaves it), :mod:`.recall`.

A cycle is made for every reaction cycle of every object, so :func:`make` fills its slots itself
(an ``__init__`` is a Python call more) and reads Kopf's raw body inline: 2,300 instructions, 0.5 %
of a cycle (the instruction scenario, 2026-12-06), kept with :mod:`.reaction`'s loop for cycles
without a memory because together they keep five observers within the per-cycle hold line
(benchmarks README).

Parking is marked, never inferred (:mod:`.marks`), and our memory's record of it says ``parked``.
"""
from __future__ import annotations

import contextvars
import types
from collections.abc import Collection, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from kopf_outcomes import memory
from kopf_outcomes._kopf import dependents
from kopf_outcomes._kopf.internals import (
    Cause,
    Handler,
    HandlerState,
    OperatorSettings,
    OperatorWrites,
    State,
    changing_ids,
    kind_of,
    operator_registry,
    operator_writes,
    registered_ids,
)
from kopf_outcomes._kopf.marks import HELD_MARK, PARKED_MARK, RETAINED_MARK, Held
from kopf_outcomes.kinds import PERSISTING, Kind
from kopf_outcomes.memory import MemoryKeys, MemoryRecord
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
    # the cycle's patch leaves it (``refreshing.refresh``).
    tracked: Mapping[str, tuple[Handler, Cycle, bool]]
    quiet: AbstractSet[str]  # rechecking handlers that concluded as before: nothing new to store
    recalled: AbstractSet[str]  # handlers given their idempotency key (``recall()``) in this cycle
    # The other objects of handlers with ``depends_on_objects`` (and their fingerprint), taken
    # before any handler of the cycle runs: what they see and conclude about.
    objects: Mapping[str, dependents.Taken]

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
    persists = kind in PERSISTING
    if persists:
        body: Mapping[str, Any] | None
        try:  # raw_body_of, inline (see the module's docstring)
            body = cause.body._src  # type: ignore[attr-defined]
        except AttributeError:  # a plain mapping, or no body
            body = getattr(cause, "body", None)
        annotations = (body.get("metadata") or EMPTY).get("annotations") if body is not None else None
        if annotations and keys.memory in annotations and body is not None:
            records = memory.own(memory.read(body, cause.logger, keys), body)
            unreadable = not records
    cycle = _new(Cycle)  # its slots set here, no __init__ (see the module's docstring)
    cycle.settings, cycle.keys, cycle.kind, cycle.handlers, cycle.state = settings, keys, kind, handlers, state
    cycle.persists, cycle.records, cycle.unreadable = persists, records, unreadable
    cycle.children = cycle.tracked = cycle.objects = NONE_YET
    cycle.quiet = cycle.recalled = NO_IDS
    return cycle


_new = object.__new__


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


def records_as_patched(cycle: Cycle, patch: Mapping[str, Any]) -> Mapping[str, MemoryRecord]:
    """The object's memory as this cycle's patch leaves it."""
    pending = (patch.get("metadata") or EMPTY).get("annotations", EMPTY).get(cycle.keys.memory, _UNWRITTEN)
    return cycle.records if pending is _UNWRITTEN else memory.parse(pending) if pending else EMPTY


_UNWRITTEN = object()


