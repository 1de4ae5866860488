"""
A run's conclusion kept and told: remembered in the object's memory (in the cycle's patch), then
told to the observers, who read the record there (a retention's stamp, to print the command that
releases it). Where an observer fails, the run is a Retry, remembered as one in place of the
conclusion.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from typing import Any

from kopf_outcomes import engine, memory, objects, wakeups
from kopf_outcomes._kopf import dependents, unrecorded
from kopf_outcomes._kopf.cycle import Cycle, current, records_as_patched
from kopf_outcomes._kopf.internals import Cause, Handler, KopfOutcome, raw_body_of
from kopf_outcomes._kopf.kopf_runs import body_of
from kopf_outcomes._kopf.marks import Parked, Rechecking, Retained
from kopf_outcomes._kopf.recall import memory_of
from kopf_outcomes._kopf.refreshing import ENDS, forget, unwritten_end
from kopf_outcomes._kopf.retentions import release_answers_another
from kopf_outcomes._kopf.states import before_status, digest, remembered, woken_by
from kopf_outcomes._kopf.translation import Turn, observer_failed
from kopf_outcomes.kinds import Kind
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.memory import MemoryKeys, StoredOutcome
from kopf_outcomes.outcomes import Outcome, Pending, Retry, Success
from kopf_outcomes.runs import HandlerRun

_NOT_THE_OBJECTS = (Kind.WEBHOOK, Kind.INDEX)  # their patch is not the object's: observers write to none


# What a conclusion woken by its other objects alone does not store: why's view of them, and the key
# of a state that differs from the stored one only by those objects (the stored key stays the key of
# the stored state; a run about the new objects makes its key from them, see recall.memory_of).
_UNSTORED_WHEN_QUIET = frozenset({"seen", "key"})


def _as_stored(record: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key not in _UNSTORED_WHEN_QUIET}


def conclude(turn: Turn, outcome: Outcome, result: KopfOutcome) -> KopfOutcome:
    """Remember what the run concluded about this state, then tell the observers: they read the
    conclusion's record in the patch (a retention's stamp, to print the command that releases it).
    Where an observer failed, the run is a Retry, remembered as one in place of the conclusion (its
    key kept as a Retry keeps it)."""
    remember(turn, outcome, result)
    fallback = observed(turn.plugins, turn.cycle.kind, turn.cycle.keys, turn.run, turn.cause, outcome) \
        if turn.plugins.observed else None
    if fallback is None:
        return result
    result = observer_failed(turn.handler, fallback, turn.cause)
    if str(turn.handler.id) in turn.cycle.quiet:  # the conclusion was as before; the Retry is not
        turn.cycle.own_quiet().discard(str(turn.handler.id))
    remember(turn, fallback, result)
    return result


def remember(turn: Turn, outcome: Outcome, result: KopfOutcome) -> None:
    """The run's conclusion about this state in the object's memory, in the cycle's patch."""
    plugins, cycle, run, handler, cause, _ = turn
    body, patch = body_of(cause), getattr(cause, "patch", None)
    if body is not None and patch is not None and cycle.persists:
        stored = stored_outcome(outcome, result)
        handler_id = str(handler.id)
        taken = cycle.objects.get(handler_id)  # (its other objects, their fingerprint), if it has some
        new: memory.MemoryRecord | None = None
        # The record survives a Retry (or an error) about the state it was about: the handler acted on it.
        known = memory_of(plugins, cycle, handler, cause) if run.previous is not None or stored in _KEPT \
            or run.options.remember or handler_id in cycle.recalled else None
        unrecorded.concluded(str((body.get("metadata") or {}).get("uid") or ""), handler_id,
                             concluded_about(turn, known) if result.final else unrecorded.NOT_FOR_GOOD)
        acted = not (stored == "retry" and known is not None and not known.acted_on_this_state
                     and not run.options.remember)
        if known is not None and (stored in _KEPT or run.options.remember
                                  or (stored == "retry" and known.acted_on_this_state)
                                  or ((not acted or stored in ENDS) and keeps_key(turn, known))):
            ignored = run.previous.get("ignored_release") if run.previous is not None else None
            if stored in _KEPT and (run.previous is None or run.previous["outcome"] != stored):
                ignored = ignore_leftover_release(turn, body, patch)
            woke = woken_by(plugins, cycle, handler, cause, run.previous)
            state_digest = remembered(plugins, cycle, handler, cause)
            new = memory.record(run.previous, digest=state_digest,
                                before_status=before_status(plugins, cycle, handler, cause, state_digest),
                                outcome=stored,
                                reason=str(outcome) if not isinstance(outcome, Success) else "",
                                parked=isinstance(result.exception, Parked), depends_on=run.options.depends_on,
                                ignore=run.options.ignore,
                                recheck=outcome.recheck if isinstance(outcome, Pending) else None,
                                objects=taken[1] if taken is not None else None,
                                woken_by=wakeups.history(run.previous.get("woken_by") if run.previous else None, woke),
                                deadline=getattr(result.exception, "deadline", None),
                                uid=str((body.get("metadata") or {}).get("uid") or ""), key=known.idempotency_key,
                                ignored_release=ignored if stored in _KEPT else None,
                                stamp=stamp_of(result, run.previous) if stored == "retained" else None,
                                acted=acted)
            if woke and run.previous is not None and (run.previous["outcome"], run.previous["reason"]) == (
                    new["outcome"], new["reason"]) and (stored not in ENDS or run.options.remember):
                hint = wakeups.fruitless(handler_id, woke)
                if hint is not None:
                    _HINTS.warning(hint)
            if taken is not None:
                if (isinstance(result.exception, (Parked, Rechecking)) and run.previous is not None
                        and _as_stored(new) == _as_stored({**run.previous, "objects": taken[1]})):
                    new = run.previous  # woken by its other objects only, concluding as before: known here
                    cycle.own_quiet().add(handler_id)
                    dependents.saw(cause, handler_id, taken[1])
                else:
                    new["seen"] = seen_objects(handler, cause)  # for why: made only where it is stored
                    dependents.saw(cause, handler_id, None)  # stored: the memory carries what it saw
        memory.write(body, patch, handler_id, new, cause.logger, cycle.keys, known=cycle.records)
        if new is not None and current() is None and unwritten_end(plugins, cycle, handler, cause, new):
            forget(cycle, body, patch, handler_id, cause)  # outside of a cycle: no refresh decides it later
        elif new is not None:
            cycle.own_tracked()[handler_id] = (handler, cycle, True)
        if isinstance(result.exception, Rechecking) and new is not None and new == run.previous:
            cycle.own_quiet().add(handler_id)  # the same conclusion about the same state: no need to store


_KEPT = frozenset({"pending", "retained"})


def concluded_about(turn: Turn, known: memory.Memory | None) -> frozenset[str]:
    """The state a conclusion for good is about, as :mod:`.unrecorded` keeps it: its digest as the run
    saw it, and as the cycle's patch leaves it (the handler's own writes, made again on an older view)."""
    plugins, cycle, _, handler, cause, _ = turn
    seen = known.digest if known is not None else digest(plugins, cycle, handler, cause)
    return frozenset({seen, digest(plugins, cycle, handler, cause, patched=True)})


def stamp_of(result: KopfOutcome, previous: memory.MemoryRecord | None) -> str | None:
    """The retention's stamp: the one its log named as it was retained; else the one it has."""
    if isinstance(result.exception, Retained):
        return result.exception.stamp
    return previous.get("stamp") if previous is not None and previous["outcome"] == "retained" else None


def keeps_key(turn: Turn, known: memory.Memory) -> bool:
    """Whether the run's key was given out (``recall()``), in this run or an earlier one about its
    state: then a record keeps it for the state as the cycle's writes leave it (its own, later
    handlers', observers': see ``refreshing.refresh``), so that no write of the operator gives the next
    run another key. A Retry or error that concluded nothing keeps it ``acted: false``; an end: see
    ``refreshing.ENDS``."""
    return known.about_this_state or str(turn.handler.id) in turn.cycle.recalled


def ignore_leftover_release(turn: Turn, body: Mapping[str, Any], patch: MutableMapping[str, Any]) -> str | None:
    """A release annotation that names a handler (or ``*``) as it begins to wait (retained, or
    pending: released by a person only where it left the filters, :mod:`.held`) was set before this
    wait: it answers an earlier one, or none, and releases nothing of this one. Where it still
    answers a handler retained before, it stays for that one, and its value is returned: the record
    keeps it as the value that releases none of this handler. Else it goes in this PATCH."""
    keys, handler = turn.cycle.keys, turn.handler
    if not memory.release_requested(body, str(handler.id), keys):
        return None
    value = ((body.get("metadata") or {}).get("annotations") or {}).get(keys.release)
    turn.cause.logger.warning(f"Ignored the release annotation {keys.release}={value!r} for {handler}: it was set "
                              f"before {handler} began to wait, so it releases nothing of this wait. Set it again, "
                              f"once it is gone, to release this one.")
    if release_answers_another(turn.cycle, body, patch, str(handler.id)):
        return str(value)
    answered(turn.cycle, body, patch, turn.cause.logger)
    return None


def answered(cycle: Cycle, body: Mapping[str, Any], patch: MutableMapping[str, Any],
             logger: logging.Logger | logging.LoggerAdapter[Any]) -> None:
    """The release annotation goes in this PATCH: it answered every retention it could, and releases
    no handler retained later; with it goes each record's note that it released none of them."""
    memory.consume_release(body, patch, cycle.keys)
    for handler_id, record in records_as_patched(cycle, patch).items():
        if "ignored_release" in record:
            kept = memory.MemoryRecord(**record)
            del kept["ignored_release"]
            memory.write(body, patch, handler_id, kept, logger, cycle.keys, known=cycle.records)


def seen_objects(handler: Handler, cause: Cause) -> list[dict[str, Any]]:
    """The handler's other objects as the memory names them for ``why`` (from Kopf's indices,
    as the cycle read them): never part of what is compared, so they wake and write nothing."""
    body, indices = raw_body_of(cause), getattr(cause, "indices", None)
    if body is None or indices is None:
        return []
    return objects.described(objects.sources_of(handler.fn), body, indices)


# Hints about the operator's code, not about an object: logged, never posted as an Event.
_HINTS = logging.getLogger("kopf_outcomes")


def tell(plugins: PluginManager, kind: Kind, keys: MemoryKeys, run: HandlerRun, handler: Handler, cause: Cause,
         outcome: Outcome, result: KopfOutcome) -> KopfOutcome:
    """Tell the observers the outcome: ``result`` stands, unless one of them failed. Where Kopf's
    patch is not the object's (a webhook's answer, an indexer's unused one), they write to none.
    Stock outcomes are told on every observed run, most of them outside of any memory: no Turn."""
    fallback = observed(plugins, kind, keys, run, cause, outcome)
    return observer_failed(handler, fallback, cause) if fallback is not None else result


def observed(plugins: PluginManager, kind: Kind, keys: MemoryKeys, run: HandlerRun, cause: Cause,
             outcome: Outcome) -> engine.PluginFailure | None:
    """Tell the observers the outcome; the fallback where one of them failed."""
    patch = None if kind in _NOT_THE_OBJECTS else getattr(cause, "patch", None)  # an activity's cause has none
    return engine.observe(plugins, run, outcome, patch if patch is not None else {}, keys)


def stored_outcome(outcome: Outcome, result: KopfOutcome) -> StoredOutcome:
    """The conclusion as the memory stores it."""
    if isinstance(result.exception, Retained):
        return "retained"
    if isinstance(outcome, Pending):
        return "pending"
    if isinstance(outcome, Success):
        return "success"
    if isinstance(outcome, Retry):
        return "retry" if not result.final else "fatal"
    return "fatal"
