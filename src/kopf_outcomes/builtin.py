"""
The built-in hook implementations: stock Kopf's own reading of results and exceptions.

They run last (``trylast``), so any plugin can decide first. Outcomes they derive from plain
results and Kopf's exceptions are marked as *stock*: if no plugin replaces such an outcome,
the run is left to stock Kopf entirely — same messages, same levels, same patches.
"""
from __future__ import annotations

import logging

import kopf

from kopf_outcomes import hookspecs
from kopf_outcomes.outcomes import Fatal, Outcome, Pending, Retry, Success
from kopf_outcomes.runs import HandlerRun

hookimpl = hookspecs.hookimpl


def is_stock(outcome: Outcome) -> bool:
    """Whether the outcome is the built-in reading of a plain result or a Kopf exception."""
    return getattr(outcome, "_kopf_outcomes_stock", False)


def _stock(outcome: Outcome) -> Outcome:
    outcome._kopf_outcomes_stock = True  # type: ignore[attr-defined]
    return outcome


@hookimpl(trylast=True)
def kopf_outcomes_classify_result(run: HandlerRun, result: object) -> Outcome:
    if isinstance(result, Outcome):
        return result
    if run.options.explicit_completion:
        if result is True:
            return Success()
        if result is False:
            return Pending("not complete yet")
        return Retry(
            f"explicit completion expects True or False, got {result!r}; "
            f"the handler will be retried and the finalizer is kept",
            delay=run.backoff,
            level=logging.ERROR,
        )
    return _stock(Success(result))


@hookimpl(trylast=True)
def kopf_outcomes_classify_exception(run: HandlerRun, exception: Exception) -> Outcome:
    if isinstance(exception, Outcome):
        return exception
    message = str(exception) or repr(exception)
    if isinstance(exception, kopf.TemporaryError):
        return _stock(Retry(message, delay=exception.delay or 0, level=logging.ERROR))
    if isinstance(exception, kopf.PermanentError):
        if run.reason == "delete" and run.options.fatal_on_delete == "retain":
            return Fatal(message, on_delete="retain")  # the handler's own option: not stock
        return _stock(Fatal(message))
    if run.errors_mode == "IGNORED":
        return _stock(Success())
    if run.errors_mode == "PERMANENT":
        return _stock(Fatal(message))
    return _stock(Retry(message, delay=run.backoff, level=logging.ERROR))
