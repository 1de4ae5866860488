"""
Our outcomes in Kopf's terms: each decided outcome becomes Kopf's ``Outcome``, logged at its
level through Kopf's per-object logger (which also decides the Kubernetes Event), remembered in
the object's memory, and told to the observers.
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection
from typing import Any

import kopf

from kopf_outcomes import engine, memory
from kopf_outcomes._kopf.cycle import PARKED_DELAY, Cycle, Parked, Rechecking, Retained, digest
from kopf_outcomes._kopf.internals import Cause, Handler, HandlerId, HandlerState, KopfOutcome, KopfResult
from kopf_outcomes._kopf.runs import body_of
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.memory import MemoryKeys, StoredOutcome
from kopf_outcomes.options import retains_on_delete
from kopf_outcomes.outcomes import Fatal, Outcome, Pending, Retry, Success
from kopf_outcomes.runs import HandlerRun
from kopf_outcomes.values import MAX_DELAY


def realize(plugins: PluginManager, cycle: Cycle, run: HandlerRun, outcome: Outcome, handler: Handler,
            cause: Cause, state: HandlerState | None, subrefs: Collection[HandlerId] = ()) -> KopfOutcome:
    """Log the decided outcome at its level and turn it into Kopf's outcome."""
    logger = cause.logger
    if isinstance(outcome, Success):
        logger.info(f"{handler} succeeded.", extra=fields(handler, "success"))
        result = KopfOutcome(final=True, result=KopfResult(outcome.result))
    elif isinstance(outcome, Pending):
        previous = run.previous
        same = previous is not None and previous["outcome"] == "pending" and previous["reason"] == outcome.reason
        logger.log(logging.DEBUG if same else logging.INFO, f"{handler} is pending: {outcome.reason}",
                   extra=fields(handler, "pending", outcome.reason, recheck=outcome.recheck))
        if outcome.recheck is not None:
            result = KopfOutcome(final=False, exception=Rechecking(outcome.reason), delay=outcome.recheck)
        else:
            result = KopfOutcome(final=False, exception=Parked(outcome.reason), delay=PARKED_DELAY)
    elif isinstance(outcome, Retry):
        result = retry(handler, state, outcome, logger)
    elif isinstance(outcome, Fatal) and retains_on_delete(run.reason, outcome.on_delete, run.options):
        name = (run.body or {}).get("metadata", {}).get("name", "")
        logger.log(outcome.level, f"{handler} failed permanently: {outcome.reason}. The finalizer is "
                                  f"retained; to release the object, annotate it: "
                                  f"{cycle.keys.release}={handler.id} (object {name!r}).",
                   extra=fields(handler, "retained", outcome.reason))
        result = KopfOutcome(final=False, exception=Retained(outcome.reason), delay=PARKED_DELAY)
    elif isinstance(outcome, Fatal):
        logger.log(outcome.level, f"{handler} failed permanently: {outcome.reason}",
                   extra=fields(handler, "fatal", outcome.reason))
        result = KopfOutcome(final=True, exception=kopf.PermanentError(outcome.reason))
    else:  # an Outcome subclass of a user's own making
        unknown = Retry(f"unknown outcome type {type(outcome).__name__}; expected Success, Pending, "
                        f"Retry or Fatal", delay=run.backoff, level=logging.ERROR)
        return realize(plugins, cycle, run, unknown, handler, cause, state, subrefs)
    result = dataclasses.replace(result, subrefs=subrefs)
    return conclude(plugins, cycle, run, handler, cause, outcome, result)


def fields(handler: Handler, outcome: str, reason: str | None = None, **more: float | None) -> dict[str, object]:
    """The outcome as structured fields of the log record: Kopf's JSON log format shows them."""
    found: dict[str, object] = {"handler": str(handler.id), "outcome": outcome}
    if reason is not None:
        found["reason"] = reason
    found.update((key, value) for key, value in more.items() if value is not None)
    return found


def retry(handler: Handler, state: HandlerState | None, outcome: Retry,
          logger: logging.Logger | logging.LoggerAdapter[Any]) -> KopfOutcome:
    """A Retry counts against the handler's ``retries=`` and ``timeout=``, as TemporaryError does."""
    if state is not None and not isinstance(outcome, engine.PluginFailure):
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
    return KopfOutcome(final=False, exception=kopf.TemporaryError(outcome.reason, delay=outcome.delay),
                       delay=outcome.delay)


def conclude(plugins: PluginManager, cycle: Cycle, run: HandlerRun, handler: Handler, cause: Cause,
             outcome: Outcome, result: KopfOutcome) -> KopfOutcome:
    """Remember what the handler concluded about this state, and tell the observers."""
    body, patch = body_of(cause), getattr(cause, "patch", None)
    if body is not None and patch is not None:
        stored = stored_outcome(outcome, result)
        new: memory.MemoryRecord | None = None
        if stored in ("pending", "retained") or run.options.remember:
            new = memory.record(run.previous, digest=digest(plugins, cycle, handler, cause), outcome=stored,
                                reason=str(outcome) if not isinstance(outcome, Success) else "",
                                parked=isinstance(result.exception, Parked), depends_on=run.options.depends_on,
                                recheck=outcome.recheck if isinstance(outcome, Pending) else None)
        memory.write(body, patch, str(handler.id), new, cause.logger, cycle.keys, known=cycle.records)
        if isinstance(result.exception, Rechecking) and new is not None and new == run.previous:
            result.exception.quiet = True  # the same conclusion about the same state: no need to store
    return tell(plugins, cycle.keys, run, handler, cause, outcome, result)


def tell(plugins: PluginManager, keys: MemoryKeys, run: HandlerRun, handler: Handler, cause: Cause,
         outcome: Outcome, result: KopfOutcome) -> KopfOutcome:
    """Tell the observers the outcome: ``result`` stands, unless one of them failed."""
    patch = getattr(cause, "patch", None)
    fallback = engine.observe(plugins, run, outcome, patch if patch is not None else {}, keys)
    if fallback is not None:  # an observer failed: retry, whatever was decided
        return retry(handler, None, fallback, cause.logger)
    return result


def stored_outcome(outcome: Outcome, result: KopfOutcome) -> StoredOutcome:
    if isinstance(outcome, Pending):
        return "pending"
    if isinstance(outcome, Success):
        return "success"
    if isinstance(outcome, Retry):
        return "retry" if not result.final else "fatal"
    return "fatal" if result.final else "retained"


_SUCCESS = Success()  # outcomes are values: the common one is made once


def from_kopf(outcome: KopfOutcome) -> Outcome:
    """Stock Kopf's outcome in our terms, for the observers."""
    if outcome.final and outcome.exception is None:
        return _SUCCESS if outcome.result is None else Success(outcome.result)
    if outcome.final:
        return Fatal(str(outcome.exception) or repr(outcome.exception))
    return Retry(str(outcome.exception) or repr(outcome.exception),
                 delay=min(outcome.delay or 0, MAX_DELAY), level=logging.ERROR)
