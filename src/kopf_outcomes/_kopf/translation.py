"""
Our outcomes in Kopf's terms: each decided outcome becomes Kopf's ``Outcome``, logged at its
level through Kopf's per-object logger (which also decides the Kubernetes Event). Nothing here
remembers or tells: :mod:`.handler_run` does that with the result (:mod:`.concluding`).
"""
from __future__ import annotations

import dataclasses
import logging
import secrets
from collections.abc import Collection
from typing import Any, NamedTuple

import kopf

from kopf_outcomes import engine, memory
from kopf_outcomes._kopf import deadlines
from kopf_outcomes._kopf.cycle import Cycle
from kopf_outcomes._kopf.internals import (
    Cause,
    Handler,
    HandlerId,
    HandlerState,
    KopfOutcome,
    KopfResult,
    OperatorSettings,
)
from kopf_outcomes._kopf.kopf_runs import build
from kopf_outcomes._kopf.marks import PARKED_DELAY, Held, Parked, Polling, Rechecking, Retained
from kopf_outcomes.events import attach as attach_events
from kopf_outcomes.finalizer import fault, retains
from kopf_outcomes.kinds import REFUSALS, Effect, Kind, effect_of
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.memory import MemoryRecord
from kopf_outcomes.outcomes import Fatal, Outcome, Pending, Retry, Success, deadline_of
from kopf_outcomes.runs import HandlerRun
from kopf_outcomes.values import MAX_DELAY, FatalOnDelete


class Turn(NamedTuple):
    """One handler run, as translating its outcome needs it: the plugins that decide and observe,
    the cycle, the run as hooks see it, and Kopf's handler, cause and progress of the handler."""

    plugins: PluginManager
    cycle: Cycle
    run: HandlerRun
    handler: Handler
    cause: Cause
    state: HandlerState | None


def turn_of(plugins: PluginManager, cycle: Cycle, handler: Handler, cause: Cause, state: HandlerState,
            settings: OperatorSettings, record: MemoryRecord | None) -> Turn:
    """The run, as concluding it after Kopf's ``execute_handler_once`` needs it."""
    run = build(plugins, cycle.kind, handler, cause, state.retries, state, settings, record, cycle)
    return Turn(plugins, cycle, run, handler, cause, state)


def effective(turn: Turn, outcome: Outcome) -> Outcome:
    """The outcome that is carried out: where the release decision finds a fault, a hold (a
    :class:`~kopf_outcomes.engine.PluginFailure`); an ``Outcome`` subclass of a user's own making, a Retry."""
    run = turn.run
    if not isinstance(outcome, (Pending, engine.PluginFailure)):  # the release decision's faults hold
        held = fault(turn.cycle.kind, run.reason, run.options, getattr(outcome, "on_delete", None))
        if held is not None:
            return engine.PluginFailure(f"held: {held}; the finalizer is kept", delay=run.backoff,
                                        level=logging.ERROR)
    if effect_of(turn.cycle.kind, outcome) is Effect.RETRY and not isinstance(outcome, Retry):
        unknown = Retry(f"unknown outcome type {type(outcome).__name__}; expected Success, Pending, "
                        f"Retry or Fatal", delay=run.backoff, level=logging.ERROR)
        return effective(turn, unknown)
    return outcome


def realize(turn: Turn, outcome: Outcome, subrefs: Collection[HandlerId] = ()) -> KopfOutcome:
    """Log the outcome (an :func:`effective` one) at its level and turn it into Kopf's outcome, as
    the kind's row of the table (:mod:`kopf_outcomes.kinds`) says."""
    cycle, run, handler, logger = turn.cycle, turn.run, turn.handler, turn.cause.logger
    attach_events()  # an outcome line follows: its Event is posted with a reason of its own
    effect = effect_of(cycle.kind, outcome)
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
    return dataclasses.replace(result, subrefs=subrefs)


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


def observer_failed(handler: Handler, fallback: engine.PluginFailure, cause: Cause) -> KopfOutcome:
    """An observer failed: retry, whatever was decided."""
    attach_events()
    return retry(handler, None, fallback, cause.logger)


_SUCCESS = Success()  # outcomes are values: the common one is made once


def from_kopf(outcome: KopfOutcome) -> Outcome:
    """Stock Kopf's outcome in our terms, for the observers."""
    if outcome.final and outcome.exception is None:
        return _SUCCESS if outcome.result is None else Success(outcome.result)
    if outcome.final:
        return Fatal(str(outcome.exception) or repr(outcome.exception))
    return Retry(str(outcome.exception) or repr(outcome.exception),
                 delay=min(outcome.delay or 0, MAX_DELAY), level=logging.ERROR)
