"""
Conditions by the Kubernetes API conventions (``metav1.Condition``): CamelCase types and
reasons, status "True"/"False"/"Unknown", ``observedGeneration``, and ``lastTransitionTime``
that moves only when the status does.
"""
from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping
from typing import Any

SUMMARY = "HandlersSucceeded"
SUFFIX = "Succeeded"

# The reasons this plugin writes; with the type suffix they tell its conditions from others'.
REASONS = frozenset({"Succeeded", "Pending", "Retrying", "Failed", "FinalizerRetained", "Waiting"})

_WORD = re.compile(r"[A-Za-z0-9]+")


def condition_type(handler_id: str) -> str:
    """``delete_fn`` → ``DeleteFnSucceeded``; ``create_fn/sub-1`` → ``CreateFnSub1Succeeded``."""
    words = _WORD.findall(handler_id) or ["Handler"]
    camel = "".join(word[:1].upper() + word[1:] for word in words)
    if camel[:1].isdigit():
        camel = "Handler" + camel
    return camel + SUFFIX


def is_ours(condition: Mapping[str, Any]) -> bool:
    kind, reason = condition.get("type"), condition.get("reason")
    return isinstance(kind, str) and kind.endswith(SUFFIX) and kind != SUMMARY and reason in REASONS


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def updated(current: Mapping[str, Any] | None, kind: str, status: str, reason: str, message: str,
            generation: int | None, at: str) -> dict[str, Any]:
    """The condition as it should be; ``lastTransitionTime`` kept unless the status changes."""
    condition: dict[str, Any] = {"type": kind, "status": status, "reason": reason, "message": message}
    if generation is not None:
        condition["observedGeneration"] = generation
    same_status = current is not None and current.get("status") == status and current.get("lastTransitionTime")
    condition["lastTransitionTime"] = current["lastTransitionTime"] if same_status and current else at
    return condition


def summary(conditions: Iterable[Mapping[str, Any]], generation: int | None, current: Mapping[str, Any] | None,
            at: str) -> dict[str, Any]:
    """``HandlersSucceeded``: True when every handler condition is True, else why not."""
    waiting = [c for c in conditions if is_ours(c) and c.get("status") != "True"]
    if not waiting:
        return updated(current, SUMMARY, "True", "Succeeded", "All handlers succeeded.", generation, at)
    first = waiting[0]
    names = ", ".join(str(c["type"])[: -len(SUFFIX)] for c in waiting)
    message = f"Waiting for {len(waiting)} handler(s): {names}. {first['type']}: {first.get('message', '')}"
    reason = str(first["reason"]) if len(waiting) == 1 else "Waiting"
    return updated(current, SUMMARY, "False", reason, message.strip(), generation, at)


def merged(conditions: list[dict[str, Any]], condition: dict[str, Any]) -> list[dict[str, Any]]:
    """Replace the condition of the same type in place, or append it."""
    if any(c.get("type") == condition["type"] for c in conditions):
        return [condition if c.get("type") == condition["type"] else c for c in conditions]
    return [*conditions, condition]
