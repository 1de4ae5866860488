"""
A person's release of a retained handler (``outcomes.kopf.zalando.org/release=<handler>@<stamp>``),
concluded before Kopf would run the handler: the retention ends as a released Fatal's does, or,
where an observer fails on it, the release (not the handler) is retried at a deadline; one
withdrawn while its retry waited leaves the handler retained.
"""
from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any

import kopf

from kopf_outcomes import memory
from kopf_outcomes._kopf import deadlines, unrecorded
from kopf_outcomes._kopf.concluding import answered, observed, remember
from kopf_outcomes._kopf.cycle import Cycle, record_of
from kopf_outcomes._kopf.internals import Cause, Handler, HandlerId, HandlerState, KopfOutcome, OperatorSettings
from kopf_outcomes._kopf.kopf_runs import body_of
from kopf_outcomes._kopf.marks import PARKED_DELAY, Retained
from kopf_outcomes._kopf.retentions import (
    release_answers_another,
    release_granted,
    release_stands,
    released_children,
    retained_children,
)
from kopf_outcomes._kopf.translation import Turn, fields, turn_of
from kopf_outcomes.events import attach as attach_events
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.outcomes import Fatal


def released(plugins: PluginManager, cycle: Cycle, handler: Handler, cause: Cause, state: HandlerState,
             settings: OperatorSettings) -> KopfOutcome | None:
    """A retained finalizer, released by the annotation a person set (the wake-up checked it);
    None where the handler is not retained (its progress carries the retained mark: checked first)."""
    handler_id = str(handler.id)
    record, body = record_of(cycle, handler_id, state), body_of(cause)
    if record is None or record["outcome"] != "retained" or body is None:
        return None
    turn = turn_of(plugins, cycle, handler, cause, state, settings, record)
    if not release_stands(cycle, handler_id, body, record):  # withdrawn while its retry waited
        return still_retained(turn, record, f"the release annotation {cycle.keys.release!r} whose release was "
                                            f"retried no longer releases it.")
    if memory.release_answers(body, handler_id, record, cycle.keys):  # its own: with what retains it below
        children = {child_id: cycle.records[child_id] for child_id in sorted(retained_children(cycle, handler_id))}
        waiting = [child["deadline"] for child in children.values() if deadlines.retrying(child)]
        deadline = waiting[0] if waiting else released_with(turn, state, settings, children, for_parent=True)
        return release(turn, record) if deadline is None else release_retried(turn, record, deadline)
    children = released_children(cycle, handler_id, body)  # released through its retained sub-handlers
    others = sorted(retained_children(cycle, handler_id) - children.keys())
    children = {child_id: through(cycle, body, child_id, child, children) for child_id, child in children.items()}
    deadline = released_with(turn, state, settings, children, for_parent=not others)
    if deadline is not None:  # an observer failed on a child's release: both wait for its retry
        return release_retried(turn, record, deadline)
    if others:  # the parent waits with them, as retained as before (one's release retried: for its retry)
        retried = [cycle.records[other]["deadline"] for other in others if deadlines.retrying(cycle.records[other])]
        if retried:
            return release_retried(turn, record, retried[0])
        return still_retained(turn, record, f"its sub-handler(s) {', '.join(others)} still retain the finalizer; "
                                            f"their release releases it.")
    entry = granting_entry(cycle, body, handler_id, children)
    if entry is not None:  # the release it leaves to the parent, kept where that is retried
        record = memory.MemoryRecord(**{**record, "released_by": entry})
    return release(turn, record)


def granting_entry(cycle: Cycle, body: Mapping[str, Any], handler_id: str,
                   released: Mapping[str, memory.MemoryRecord]) -> str | None:
    """The release annotation's entry that releases this handler through its released sub-handlers:
    the one answering a sub-handler's own retention, or the one a sub-handler was released by."""
    prefix = f"{handler_id}/"
    for child_id, child in released.items():
        if child_id.startswith(prefix) and memory.release_answers(body, child_id, child, cycle.keys):
            return memory.release_value(child_id, child)
    for child_id, child in released.items():
        granted = child.get("released_by")
        if child_id.startswith(prefix) and granted is not None and release_granted(cycle, child_id, body, child):
            return granted
    return None


def through(cycle: Cycle, body: Mapping[str, Any], child_id: str, child: memory.MemoryRecord,
            released: Mapping[str, memory.MemoryRecord]) -> memory.MemoryRecord:
    """A sub-handler released through those below it (not by its own release) keeps the entry that
    released them (``released_by``), so that its release, retried where an observer fails on it, still
    stands when those below are gone."""
    if memory.release_answers(body, child_id, child, cycle.keys) or "released_by" in child:
        return child
    entry = granting_entry(cycle, body, child_id, released)
    return child if entry is None else memory.MemoryRecord(**{**child, "released_by": entry})


def released_with(parent: Turn, state: HandlerState, settings: OperatorSettings,
                  children: dict[str, memory.MemoryRecord], for_parent: bool) -> str | None:
    """The retained sub-handlers released with their parent, each concluded and told (its parent's
    run is not running it); the retry's deadline where an observer failed on one (the rest wait)."""
    for child_id, child_record in children.items():
        child = dataclasses.replace(parent.handler, id=HandlerId(child_id))
        concluded = release(turn_of(parent.plugins, parent.cycle, child, parent.cause, state, settings, child_record),
                            child_record, for_parent=for_parent)
        deadline: str | None = getattr(concluded.exception, "deadline", None)
        if deadline is not None:
            return deadline
    return None


def release(turn: Turn, record: memory.MemoryRecord, for_parent: bool = False) -> KopfOutcome:
    """
    A person's release of a retained handler, concluded: its retention goes (its record ends as a
    released Fatal's does: ``refreshing.ENDS``; no stamp, no hold), Kopf's failure is final
    (the finalizer goes, the release annotation with it), and the observers are told. Where one of
    them fails, the release is retried, not the handler: the handler stays retained as it was (its
    record, stamp and Kopf's retained mark), the release annotation stays, and the release is
    attempted again at the retry's deadline (in its record, and ``Parked.deadline`` for the
    requeue), not before (no busy loop on the cycle's own write), while the annotation still answers
    it; the handler's function never runs again. A sub-handler released ``for_parent`` leaves the
    annotation to its parent's release, which consumes it as it is told: where that is retried, the
    parent's record keeps the entry that released the sub-handler (``released_by``), so that the
    person's release is not lost (:func:`.retentions.release_granted`).
    """
    reason = record["reason"]
    final = KopfOutcome(final=True, exception=kopf.PermanentError(reason))
    outcome = Fatal(reason, on_delete="release")
    remember(turn, outcome, final)
    fallback = observed(turn.plugins, turn.cycle.kind, turn.cycle.keys, turn.run, turn.cause, outcome) \
        if turn.plugins.observed else None
    body, patch = body_of(turn.cause), getattr(turn.cause, "patch", None)
    handler_id = str(turn.handler.id)
    if fallback is None:
        turn.cause.logger.warning(f"{turn.handler} is released by the annotation {turn.cycle.keys.release!r}; "
                                  f"the finalizer is no longer retained.")
        if body is not None and patch is not None and not for_parent \
                and not release_answers_another(turn.cycle, body, patch, handler_id):
            answered(turn.cycle, body, patch, turn.cause.logger)  # it releases no handler retained later
        return final
    attach_events()
    turn.cause.logger.log(fallback.level, f"The release of {turn.handler} is retried in {fallback.delay:g} s, "
                                          f"not the handler: {fallback.reason}",
                          extra=fields(turn.handler, "retry", fallback.reason, delay=fallback.delay))
    deadline = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=fallback.delay)).isoformat()
    return release_retried(turn, record, deadline)


def release_retried(turn: Turn, record: memory.MemoryRecord, deadline: str) -> KopfOutcome:
    """The handler stays retained as it was, its release attempted again at ``deadline``: in its
    record (a restart reads it there), and on Kopf's retained mark (the requeue's wait)."""
    body, patch = body_of(turn.cause), getattr(turn.cause, "patch", None)
    if body is not None and patch is not None and turn.cycle.persists:
        handler_id = str(turn.handler.id)
        unrecorded.concluded(str((body.get("metadata") or {}).get("uid") or ""), handler_id)
        memory.write(body, patch, handler_id, memory.MemoryRecord(**{**record, "deadline": deadline}),
                     turn.cause.logger, turn.cycle.keys, known=turn.cycle.records)
    retained = Retained(record["reason"], record.get("stamp"))
    retained.deadline = deadline
    return KopfOutcome(final=False, exception=retained, delay=PARKED_DELAY)


def still_retained(turn: Turn, record: memory.MemoryRecord, why: str) -> KopfOutcome:
    """A retained handler whose release, retried, no longer stands when its retry comes (the person
    removed the annotation), or a parent released through some of its retained sub-handlers while
    others still retain: it stays retained, as before the release, and waits for a person."""
    body, patch = body_of(turn.cause), getattr(turn.cause, "patch", None)
    turn.cause.logger.warning(f"{turn.handler} stays retained: {why}")
    if body is not None and patch is not None and turn.cycle.persists and {"deadline", "released_by"} & record.keys():
        kept = memory.MemoryRecord(**record)
        kept.pop("deadline", None)
        kept.pop("released_by", None)
        memory.write(body, patch, str(turn.handler.id), kept, turn.cause.logger, turn.cycle.keys,
                     known=turn.cycle.records)
    return KopfOutcome(final=False, exception=Retained(record["reason"], record.get("stamp")), delay=PARKED_DELAY)
