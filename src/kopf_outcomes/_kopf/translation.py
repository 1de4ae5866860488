"""
Our outcomes in Kopf's terms: each decided outcome becomes Kopf's ``Outcome``, logged at its
level through Kopf's per-object logger (which also decides the Kubernetes Event), remembered in
the object's memory, and told to the observers.
"""
from __future__ import annotations

import dataclasses
import datetime
import logging
import secrets
from collections.abc import Collection, Mapping, MutableMapping
from typing import Any, NamedTuple

import kopf

from kopf_outcomes import engine, memory, objects, wakeups
from kopf_outcomes._kopf import deadlines, dependents, unrecorded
from kopf_outcomes._kopf.cycle import (
    ENDS,
    Cycle,
    current,
    forget,
    memory_of,
    records_as_patched,
    release_answers_another,
    unwritten_end,
)
from kopf_outcomes._kopf.internals import Cause, Handler, HandlerId, HandlerState, KopfOutcome, KopfResult, raw_body_of
from kopf_outcomes._kopf.kopf_runs import body_of
from kopf_outcomes._kopf.marks import PARKED_DELAY, Held, Parked, Polling, Rechecking, Retained
from kopf_outcomes._kopf.states import before_status, digest, remembered, woken_by
from kopf_outcomes.events import attach as attach_events
from kopf_outcomes.finalizer import fault, retains
from kopf_outcomes.kinds import REFUSALS, Effect, Kind, effect_of
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.memory import MemoryKeys, StoredOutcome
from kopf_outcomes.outcomes import Fatal, Outcome, Pending, Retry, Success, deadline_of
from kopf_outcomes.runs import HandlerRun
from kopf_outcomes.values import MAX_DELAY, FatalOnDelete

_WEBHOOK, _INDEX = Kind.WEBHOOK, Kind.INDEX  # patches that are not the object's (an Enum hashes in Python)


class Turn(NamedTuple):
    """One handler run, as translating its outcome needs it: the plugins that decide and observe,
    the cycle, the run as hooks see it, and Kopf's handler, cause and progress of the handler."""

    plugins: PluginManager
    cycle: Cycle
    run: HandlerRun
    handler: Handler
    cause: Cause
    state: HandlerState | None


def realize(turn: Turn, outcome: Outcome, subrefs: Collection[HandlerId] = ()) -> KopfOutcome:
    """Log the decided outcome at its level and turn it into Kopf's outcome, as the kind's
    row of the table (:mod:`kopf_outcomes.kinds`) says."""
    cycle, run, handler, logger = turn.cycle, turn.run, turn.handler, turn.cause.logger
    attach_events()  # an outcome line follows: its Event is posted with a reason of its own
    if not isinstance(outcome, (Pending, engine.PluginFailure)):  # the release decision's faults hold
        held = fault(cycle.kind, run.reason, run.options, getattr(outcome, "on_delete", None))
        if held is not None:
            outcome = engine.PluginFailure(f"held: {held}; the finalizer is kept", delay=run.backoff,
                                           level=logging.ERROR)
    effect = effect_of(cycle.kind, outcome)
    if effect is Effect.RETRY and not isinstance(outcome, Retry):  # an Outcome subclass of a user's own making
        unknown = Retry(f"unknown outcome type {type(outcome).__name__}; expected Success, Pending, "
                        f"Retry or Fatal", delay=run.backoff, level=logging.ERROR)
        return realize(turn, unknown, subrefs)
    if isinstance(outcome, Success):
        logger.info(f"{handler} succeeded.", extra=fields(handler, "success"))
        result = KopfOutcome(final=True, result=KopfResult(outcome.result))
    elif effect is Effect.REFUSE:
        result = refuse(cycle.kind, handler, outcome, logger)
    elif effect is Effect.REJECT:  # the reason is the API server's answer: no marks of ours
        reason = str(outcome)
        logger.log(getattr(outcome, "level", logging.INFO), f"{handler} rejects the request: {reason}",
                   extra=fields(handler, "fatal", reason))
        result = KopfOutcome(final=True, exception=kopf.PermanentError(reason))
    elif isinstance(outcome, Pending):
        result = pending(handler, run, outcome, effect, logger, deadlines.stamp(turn.state, outcome))
    elif isinstance(outcome, Retry):
        result = retry(handler, turn.state, outcome, logger)
        if result.final:  # retries= or timeout= exhausted: a final failure like any other
            result = guard(turn, str(result.exception)) or result
    else:
        fatal = outcome if isinstance(outcome, Fatal) else Fatal(str(outcome))
        result = guard(turn, fatal.reason, on_delete=fatal.on_delete, level=fatal.level) \
            or failed(handler, fatal, logger)
    result = dataclasses.replace(result, subrefs=subrefs)
    return conclude(turn, outcome, result)


def refuse(kind: Kind, handler: Handler, outcome: Outcome,
           logger: logging.Logger | logging.LoggerAdapter[Any]) -> KopfOutcome:
    """An outcome where the kind's row refuses it: a misuse, said at ERROR, final (nothing to remember)."""
    attach_events()
    message = (f"{handler} returned {outcome!r}, which has no meaning in a handler of kind "
               f"{kind.value!r}: {REFUSALS[kind]}.")
    logger.error(message, extra=fields(handler, "fatal", message))
    return KopfOutcome(final=True, exception=kopf.PermanentError(message))


def pending(handler: Handler, run: HandlerRun, outcome: Pending, effect: Effect,
            logger: logging.Logger | logging.LoggerAdapter[Any], deadline: str | None = None) -> KopfOutcome:
    """INFO the first time, DEBUG while the same (compared as the memory stores a reason).
    A ``deadline`` (:mod:`.deadlines`) rides on the parked or rechecking mark to the memory."""
    previous = run.previous
    same = (previous is not None and previous["outcome"] == "pending"
            and previous["reason"] == memory.stored_reason(outcome.reason))
    logger.log(logging.DEBUG if same else logging.INFO, f"{handler} is pending: {outcome.reason}",
               extra=fields(handler, "pending", outcome.reason, recheck=outcome.recheck))
    if effect is Effect.PARK or effect is Effect.RECHECK:
        mark = Parked(outcome.reason) if effect is Effect.PARK else Rechecking(outcome.reason)
        mark.deadline = deadline
        return KopfOutcome(final=False, exception=mark,
                           delay=PARKED_DELAY if effect is Effect.PARK else outcome.recheck)
    if effect is Effect.POLL:  # Kopf's in-memory retry of this kind: no memory, no requeue
        return KopfOutcome(final=False, exception=Polling(outcome.reason), delay=outcome.recheck)
    return KopfOutcome(final=True)  # SKIP: this tick is over; the timer ticks again at its interval


def failed(handler: Handler, fatal: Fatal, logger: logging.Logger | logging.LoggerAdapter[Any]) -> KopfOutcome:
    logger.log(fatal.level, f"{handler} failed permanently: {fatal.reason}",
               extra=fields(handler, "fatal", fatal.reason))
    return KopfOutcome(final=True, exception=kopf.PermanentError(fatal.reason))


def guard(turn: Turn, reason: str, *, on_delete: FatalOnDelete | None = None,
          level: int = logging.ERROR) -> KopfOutcome | None:
    """
    The finalizer guard: every final failure of a handler passes here, ours (``Fatal``, a
    ``Retry`` past ``retries=``/``timeout=``) and stock Kopf's (``PermanentError``, retries or
    timeout exhausted, ``errors=PERMANENT``). Where the rule (:func:`kopf_outcomes.finalizer.retains`)
    keeps the finalizer, the handler is retained until a person releases the object; else None,
    and the failure is final as in stock Kopf.
    """
    cycle, run, handler = turn.cycle, turn.run, turn.handler
    if not retains(cycle.kind, run.reason, on_delete, run.options):
        return None
    attach_events()
    name = (run.body or {}).get("metadata", {}).get("name", "")
    stamp = secrets.token_hex(3)  # made here: no release set before this retention can carry it
    release = memory.release_value(str(handler.id), {"stamp": stamp})
    turn.cause.logger.log(level, f"{handler} failed permanently: {reason.rstrip('.')}. The finalizer is retained; "
                                 f"to release the object, annotate it: {cycle.keys.release}={release} "
                                 f"(object {name!r}).", extra=fields(handler, "retained", reason))
    return KopfOutcome(final=False, exception=Retained(reason, stamp), delay=PARKED_DELAY)


def retain_stock(turn: Turn, outcome: KopfOutcome, on_delete: FatalOnDelete | None = None) -> KopfOutcome | None:
    """Stock Kopf's final failure, past the finalizer guard: retained where the rule says so
    (observers are told it as a retained ``Fatal``); else None, and Kopf's outcome stands."""
    reason = str(outcome.exception) or repr(outcome.exception)
    retained = guard(turn, reason, on_delete=on_delete)
    if retained is None:
        return None
    return conclude(turn, Fatal(reason, on_delete="retain"), dataclasses.replace(retained, subrefs=outcome.subrefs))


def fields(handler: Handler, outcome: str, reason: str | None = None, **more: float | None) -> dict[str, object]:
    """The outcome as structured fields of the log record: Kopf's JSON log format shows them."""
    found: dict[str, object] = {"handler": str(handler.id), "outcome": outcome}
    if reason is not None:
        found["reason"] = reason
    found.update((key, value) for key, value in more.items() if value is not None)
    return found


def due_by_deadline(state: HandlerState | None, outcome: Retry) -> Retry:
    """A Retry that must run by a deadline (an escalation's, :func:`~kopf_outcomes.outcomes.with_deadline`),
    its delay cut as Kopf counts it: from now, the run's end, to the deadline (Kopf's runtime then)."""
    deadline = deadline_of(outcome)
    if deadline is None or state is None:
        return outcome
    delay = max(0.0, deadline - state.runtime.total_seconds())
    return outcome if outcome.delay <= delay else Retry(outcome.reason, delay=delay, level=outcome.level)


def retry(handler: Handler, state: HandlerState | None, outcome: Retry,
          logger: logging.Logger | logging.LoggerAdapter[Any]) -> KopfOutcome:
    """A Retry counts against the handler's ``retries=`` and ``timeout=``, as TemporaryError does;
    a plugin's failure (a hold among them) does not: it is marked as held (:class:`.marks.Held`)."""
    held = isinstance(outcome, engine.PluginFailure)
    outcome = due_by_deadline(state, outcome)
    if state is not None and not held:
        runtime = state.runtime.total_seconds() + outcome.delay
        if handler.timeout is not None and runtime >= handler.timeout:
            msg = f"{handler} failed temporarily but will time out after {handler.timeout} seconds: {outcome.reason}"
            logger.error(msg, extra=fields(handler, "fatal", outcome.reason))
            return KopfOutcome(final=True, exception=kopf.HandlerTimeoutError(msg))
        if handler.retries is not None and state.retries + 1 >= handler.retries:
            msg = f"{handler} failed temporarily but will exceed {handler.retries} retries: {outcome.reason}"
            logger.error(msg, extra=fields(handler, "fatal", outcome.reason))
            return KopfOutcome(final=True, exception=kopf.HandlerRetriesError(msg))
    logger.log(outcome.level, f"{handler} failed temporarily: {outcome.reason}",
               extra=fields(handler, "retry", outcome.reason, delay=outcome.delay))
    mark = Held if held else kopf.TemporaryError
    return KopfOutcome(final=False, exception=mark(outcome.reason, delay=outcome.delay), delay=outcome.delay)


# What a conclusion woken by its other objects alone does not store: why's view of them, and the key
# of a state that differs from the stored one only by those objects (the stored key stays the key of
# the stored state; a run about the new objects makes its key from them, see cycle.memory_of).
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


def release(turn: Turn, record: memory.MemoryRecord) -> KopfOutcome:
    """
    A person's release of a retained handler, concluded: its retention goes (its record ends as a
    released Fatal's does: ``keeps_key``; no stamp, no hold), Kopf's failure is final
    (the finalizer goes, the release annotation with it), and the observers are told. Where one of
    them fails, the release is retried, not the handler: the handler stays retained as it was (its
    record, stamp and Kopf's retained mark), the release annotation stays, and the release is
    attempted again at the retry's deadline (in its record, and ``Parked.deadline`` for the
    requeue), not before (no busy loop on the cycle's own write), while the annotation still answers
    it; the handler's function never runs again.
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
        if body is not None and patch is not None and not release_answers_another(turn.cycle, body, patch, handler_id):
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


def still_retained(turn: Turn, record: memory.MemoryRecord) -> KopfOutcome:
    """A retained handler whose release, retried, no longer stands when its retry comes (the person
    removed the annotation): it stays retained, as before the release, and waits for a person."""
    body, patch = body_of(turn.cause), getattr(turn.cause, "patch", None)
    turn.cause.logger.warning(f"{turn.handler} stays retained: the release annotation {turn.cycle.keys.release!r} "
                              f"whose release was retried no longer releases it.")
    if body is not None and patch is not None and turn.cycle.persists and "deadline" in record:
        kept = memory.MemoryRecord(**record)
        del kept["deadline"]
        memory.write(body, patch, str(turn.handler.id), kept, turn.cause.logger, turn.cycle.keys,
                     known=turn.cycle.records)
    return KopfOutcome(final=False, exception=Retained(record["reason"], record.get("stamp")), delay=PARKED_DELAY)


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
    handlers', observers': see ``cycle.refresh``), so that no write of the operator gives the next
    run another key. A Retry or error that concluded nothing keeps it ``acted: false``; a Success or a
    released Fatal (``cycle.ENDS``) keeps it only where the cycle writes into its state (``cycle.refresh``
    ends it otherwise): a kill after that write, before the finalizer's removal, runs it again on the
    state it acted on."""
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
    Not a Turn: stock outcomes are told on every observed run, with no cycle or Turn to spare."""
    fallback = observed(plugins, kind, keys, run, cause, outcome)
    return observer_failed(handler, fallback, cause) if fallback is not None else result


def observed(plugins: PluginManager, kind: Kind, keys: MemoryKeys, run: HandlerRun, cause: Cause,
             outcome: Outcome) -> engine.PluginFailure | None:
    """Tell the observers the outcome; the fallback where one of them failed."""
    patch: Any = None
    if kind is not _WEBHOOK and kind is not _INDEX:
        try:  # an attribute, not getattr(): on every observed run; an activity's cause has none
            patch = cause.patch  # type: ignore[attr-defined]
        except AttributeError:
            pass
    return engine.observe(plugins, run, outcome, patch if patch is not None else {}, keys)


def observer_failed(handler: Handler, fallback: engine.PluginFailure, cause: Cause) -> KopfOutcome:
    """An observer failed: retry, whatever was decided."""
    attach_events()
    return retry(handler, None, fallback, cause.logger)


def stored_outcome(outcome: Outcome, result: KopfOutcome) -> StoredOutcome:
    if isinstance(result.exception, Retained):
        return "retained"
    if isinstance(outcome, Pending):
        return "pending"
    if isinstance(outcome, Success):
        return "success"
    if isinstance(outcome, Retry):
        return "retry" if not result.final else "fatal"
    return "fatal"


_SUCCESS = Success()  # outcomes are values: the common one is made once


def from_kopf(outcome: KopfOutcome) -> Outcome:
    """Stock Kopf's outcome in our terms, for the observers."""
    if outcome.final and outcome.exception is None:
        return _SUCCESS if outcome.result is None else Success(outcome.result)
    if outcome.final:
        return Fatal(str(outcome.exception) or repr(outcome.exception))
    return Retry(str(outcome.exception) or repr(outcome.exception),
                 delay=min(outcome.delay or 0, MAX_DELAY), level=logging.ERROR)
