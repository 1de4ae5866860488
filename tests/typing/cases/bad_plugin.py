"""Mistakes in a plugin's hooks that the typed markers catch: each line marked is reported."""
from __future__ import annotations

from kopf_outcomes import Decision, HandlerRun, Outcome, Pending, hooks


@hooks.classify_exception  # a parameter misnamed: pluggy would pass no `exc`
def misnamed(run: HandlerRun, exc: Exception) -> Outcome | None:
    return None


@hooks.classify_result  # a parameter of the wrong type
def mistyped(run: HandlerRun, result: str) -> Outcome | None:
    return None


@hooks.adjust_outcome  # async: hooks run inside Kopf's loop and must be plain
async def asynchronous(run: HandlerRun, decision: Decision) -> None:
    pass


@hooks.classify_result  # answers with a string, not an outcome
def wrong_answer(run: HandlerRun, result: object) -> str | None:
    return "pending"


def hand_made(run: HandlerRun) -> None:
    Pending("waiting", recheck="10s")  # a string where seconds go
