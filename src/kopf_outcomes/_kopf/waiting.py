"""
Which of a cycle's handlers that Kopf would skip run now (:func:`wakes`: its state changed, a
release answers its retention, its conclusion's write was refused), when a rechecking one is due
(:func:`recheck_wait`), and which wait, as plugins are told (:func:`observe_object`).
"""
from __future__ import annotations

import datetime
from collections.abc import Collection

from kopf_outcomes import engine, memory
from kopf_outcomes._kopf import dependents, requeue, unrecorded
from kopf_outcomes._kopf.cycle import Cycle, is_parked, record_of
from kopf_outcomes._kopf.internals import Cause, Handler, HandlerState, State, progress_of, raw_body_of
from kopf_outcomes._kopf.kopf_runs import body_of, options_of, resource_of
from kopf_outcomes._kopf.retentions import child_released, release_granted, release_waits, unanswered_release
from kopf_outcomes._kopf.states import digest
from kopf_outcomes.manager import PluginManager


def wakes(plugins: PluginManager, cycle: Cycle, handler: Handler, cause: Cause, state: HandlerState) -> bool:
    """Whether a handler that Kopf would skip must run now."""
    found = record_of(cycle, str(handler.id), state)
    if found is None:
        return is_parked(state)  # ours, with its memory lost or garbage: run it to conclude afresh
    body = raw_body_of(cause)
    if found["outcome"] == "retained":  # released by its own name, or by its retained sub-handler's
        if body is None:
            return False
        if release_granted(cycle, str(handler.id), body, found):
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
