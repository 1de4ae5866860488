"""A plugin written with the typed hook markers: no error expected."""
from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import Any

from kopf_outcomes import Decision, HandlerRun, Outcome, Pending, Retry, hooks


@hooks.classify_exception
def busy_is_pending(run: HandlerRun, exception: Exception) -> Outcome | None:
    return Pending(str(exception)) if isinstance(exception, TimeoutError) else None


@hooks.adjust_outcome.trylast
def cap(run: HandlerRun, decision: Decision) -> None:
    if isinstance(decision.outcome, Retry) and run.retry > 10:
        decision.outcome = Retry(decision.outcome.reason, delay=600)


@hooks.observe_outcome
def count(run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]) -> None:
    patch.setdefault("status", {})["last"] = type(outcome).__name__


@hooks.owned_fields
def owned() -> Iterable[str]:
    return ["status.last"]
