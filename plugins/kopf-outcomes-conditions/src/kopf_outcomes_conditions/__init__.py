"""Every handler's latest outcome as a status condition of its object."""
from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, MutableMapping
from typing import Any

from kopf_outcomes import HandlerRun, Outcome, Success, hookimpl

FIELD = "status.conditions"


def condition_type(handler_id: str) -> str:
    return "Handler-" + re.sub(r"[^A-Za-z0-9._-]", "-", handler_id)


@hookimpl
def kopf_outcomes_owned_fields() -> Iterable[str]:
    return [FIELD]


@hookimpl
def kopf_outcomes_observe_outcome(run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]) -> None:
    if run.body is None:
        return  # activities and other handlers without an object
    kind = condition_type(run.handler_id)
    status = "True" if isinstance(outcome, Success) else "False"
    reason = type(outcome).__name__
    message = "" if isinstance(outcome, Success) else str(outcome)
    pending = patch.get("status", {}).get("conditions")
    conditions: list[dict[str, Any]] = list(
        pending if pending is not None else (run.body.get("status") or {}).get("conditions") or [])
    current = next((c for c in conditions if c.get("type") == kind), None)
    if current is not None and (current.get("status"), current.get("reason"), current.get("message")) == \
            (status, reason, message):
        return  # unchanged: write nothing
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    updated = {"type": kind, "status": status, "reason": reason, "message": message,
               "lastTransitionTime": now if current is None or current.get("status") != status
               else current.get("lastTransitionTime", now)}
    conditions = [updated if c.get("type") == kind else c for c in conditions]
    if current is None:
        conditions.append(updated)
    patch.setdefault("status", {})["conditions"] = conditions
