"""
The built-in hook implementations: stock Kopf's own reading of results and exceptions.

They run last (``trylast``), so any plugin can decide first. :func:`stock_reading` is the one
place that says what stock Kopf makes of a run; plugins (the policy among them) may call it to
start from Kopf's meaning and change only what they mean to change.
"""
from __future__ import annotations

import logging
from typing import NamedTuple

import kopf

from kopf_outcomes import hookspecs
from kopf_outcomes.kinds import PERSISTING
from kopf_outcomes.outcomes import Fatal, Outcome, Pending, Retry, Success
from kopf_outcomes.runs import HandlerRun

hookimpl = hookspecs.hookimpl


class Reading(NamedTuple):
    """An outcome, and whether it is stock Kopf's own (True) or a handler's choice (False)."""

    outcome: Outcome
    stock: bool


def read_result(run: HandlerRun, result: object) -> Reading:
    """What a returned value means: an outcome as it is, explicit completion, else stock success.

    Explicit completion reads only the kinds that persist progress: only there is "not complete
    yet" kept and waited on. Elsewhere the value is the answer (a webhook's, a probe's) or nothing
    (a timer's tick, a startup activity), so a global policy line must not turn it into a Retry.
    """
    if isinstance(result, Outcome):
        return Reading(result, False)
    if run.options.explicit_completion and run.kind in PERSISTING:
        if result is True:
            return Reading(Success(), False)
        if result is False:
            return Reading(Pending("not complete yet"), False)
        return Reading(Retry(
            f"explicit completion expects True or False, got {result!r}; "
            f"the handler will be retried and the finalizer is kept",
            delay=run.backoff,
            level=logging.ERROR,
        ), False)
    return Reading(Success(result), True)


def read_exception(run: HandlerRun, exception: BaseException) -> Reading:
    """What a raised exception means: an outcome as it is, else exactly as stock Kopf reads it."""
    if isinstance(exception, Outcome):
        return Reading(exception, False)
    message = str(exception) or repr(exception)
    if isinstance(exception, kopf.TemporaryError):
        return Reading(Retry(message, delay=exception.delay or 0, level=logging.ERROR), True)
    if isinstance(exception, kopf.PermanentError):
        return Reading(Fatal(message), True)  # "retain" is the finalizer guard's, on every path
    if run.errors_mode == "IGNORED":
        return Reading(Success(), True)
    if run.errors_mode == "PERMANENT":
        return Reading(Fatal(message), True)
    return Reading(Retry(message, delay=run.backoff, level=logging.ERROR), True)


def stock_reading(run: HandlerRun, *, result: object = None, exception: BaseException | None = None) -> Reading:
    """Stock Kopf's (and the handler's own) reading of a run: the answer of the built-ins."""
    return read_result(run, result) if exception is None else read_exception(run, exception)


@hookimpl(trylast=True)
def kopf_outcomes_classify_result(run: HandlerRun, result: object) -> Outcome:
    return read_result(run, result).outcome


@hookimpl(trylast=True)
def kopf_outcomes_classify_exception(run: HandlerRun, exception: Exception) -> Outcome:
    return read_exception(run, exception).outcome
