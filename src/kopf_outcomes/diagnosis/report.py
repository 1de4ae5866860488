"""
Why an object waits: one report per object, from the object alone — Kopf's progress, our
memory, the finalizers, and for a finalizer retained on purpose the command that releases it.
"""
from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from typing import Any, cast

from kopf_outcomes import memory

# The recheck grid (since + k * recheck) as the operator schedules it: one rule, not a copy.
from kopf_outcomes._kopf.requeue import next_due
from kopf_outcomes.diagnosis import progress
from kopf_outcomes.diagnosis.kube import Kind

KOPF_FINALIZER = memory.DEFAULT_FINALIZER
_logger = logging.getLogger("kopf_outcomes.diagnosis")


def records(body: Mapping[str, Any], finalizer: str = KOPF_FINALIZER) -> dict[str, dict[str, Any]]:
    """The operator's memory of the object (its keys derive from its finalizer) — read only
    through kopf_outcomes.memory, whose format is its own; a record written for another uid is not the object's."""
    found = memory.own(memory.read(body, _logger, memory.keys_for(finalizer)), body)
    return {handler_id: dict(record) for handler_id, record in found.items()}


def release_command(kind: Kind, body: Mapping[str, Any], handler_id: str, record: Mapping[str, Any] | None,
                    finalizer: str = KOPF_FINALIZER) -> str:
    """The command that answers this retention: the release carries its stamp (from the memory)."""
    metadata = body.get("metadata") or {}
    namespace = f" -n {metadata['namespace']}" if metadata.get("namespace") else ""
    return (f"kubectl annotate --overwrite {kind.qualified} {metadata.get('name')}{namespace} "
            f"{memory.keys_for(finalizer).release}={memory.release_value(handler_id, record or {})}")


def report(kind: Kind, body: Mapping[str, Any], **options: Any) -> dict[str, Any]:
    """Everything ``why`` shows (:func:`explained`); for an object whose stored data it cannot
    make sense of, what it can say and the error: one object's data never stops ``stuck``."""
    try:
        return explained(kind, body, **options)
    except Exception as e:  # anyone may write anything into an object: report it, go on
        metadata = body.get("metadata") or {}
        return {"resource": kind.qualified, "kind": kind.kind, "namespace": metadata.get("namespace"),
                "name": metadata.get("name"), "generation": metadata.get("generation"),
                "deletionTimestamp": metadata.get("deletionTimestamp"), "waitingSeconds": None,
                "finalizers": [{"name": str(name), "operator": False, "retainedBy": []}
                               for name in metadata.get("finalizers") or []],
                "handlers": [], "error": f"{type(e).__name__}: {e}"}


def explained(kind: Kind, body: Mapping[str, Any], *, storage: progress.Storage = "both",
              prefix: str = progress.DEFAULT_PREFIX, status_field: str = progress.DEFAULT_STATUS_FIELD,
              finalizer: str = KOPF_FINALIZER, now: datetime.datetime | None = None,
              served: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Everything ``why`` shows, as plain data (the ``-o json``/``yaml`` form). ``served``: whether
    anything serves the object (:mod:`~kopf_outcomes.diagnosis.serving`), where it was asked."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    metadata = body.get("metadata") or {}
    remembered = records(body, finalizer)
    progresses = progress.read(body, remembered, storage=storage, prefix=prefix, status_field=status_field)
    handlers = []
    for handler_id in dict.fromkeys([*progresses, *remembered]):
        record, kopf_progress = remembered.get(handler_id), progresses.get(handler_id)
        state = _state(record, kopf_progress)
        overdue = overdue_since(state, record, kopf_progress, served, now)
        handlers.append({
            "id": handler_id,
            "state": state,
            "memory": record,
            "progress": kopf_progress,
            "release": release_command(kind, body, handler_id, record, finalizer) if state == "retained" else None,
            "nextRecheck": next_recheck(record, now) if overdue is None else None,
            "overdue": overdue is not None,
            "overdueSince": overdue or None,
            "escalatesAt": record.get("deadline") if record is not None and state == "pending" else None,
        })
    retained = [h["id"] for h in handlers if h["state"] == "retained"]
    deleted_at = metadata.get("deletionTimestamp")
    return {
        **({"serving": dict(served)} if served is not None else {}),
        "resource": kind.qualified,
        "kind": kind.kind,
        "namespace": metadata.get("namespace"),
        "name": metadata.get("name"),
        "generation": metadata.get("generation"),
        "deletionTimestamp": deleted_at,
        "waitingSeconds": _seconds_since(deleted_at, now) if deleted_at else None,
        "finalizers": [{"name": name, "operator": name == finalizer, "retainedBy": retained if name == finalizer
                        else []} for name in metadata.get("finalizers") or []],
        "handlers": handlers,
    }


def next_recheck(record: Mapping[str, Any] | None, now: datetime.datetime) -> str | None:
    """When a ``Pending(recheck=...)`` runs next, from the memory (ISO 8601, UTC), else None.
    Kopf's own ``delayed`` is not updated between unchanged rechecks: it may be long past."""
    if record is None or record.get("outcome") != "pending" or not record.get("recheck"):
        return None
    due = next_due(cast(memory.MemoryRecord, record), now)
    return due.astimezone(datetime.timezone.utc).isoformat() if due is not None else None


def overdue_since(state: str, record: Mapping[str, Any] | None, kopf_progress: Mapping[str, Any] | None,
                  served: Mapping[str, Any] | None, now: datetime.datetime) -> str | None:
    """Since when a timed run is overdue ("" where the moment is unknown), None if it is not: a
    retry whose time has passed (Kopf writes the next one when it runs), and a recheck while
    nothing serves the object (the first grid point after its operator was last seen). A time in
    the past is never moved forward: that looks healthy while nothing runs."""
    delayed = moment((kopf_progress or {}).get("delayed"))
    if state == "retrying" and delayed is not None and delayed < now:
        return delayed.isoformat()
    if state != "pending" or not (record or {}).get("recheck") or (served or {}).get("status") != "not-served":
        return None
    seen = moment((served or {}).get("lastSeen"))
    due = next_due(cast(memory.MemoryRecord, record), seen, after=True) if seen is not None else None
    return due.astimezone(datetime.timezone.utc).isoformat() if due is not None and due < now else ""


def moment(stamp: object) -> datetime.datetime | None:
    """A stored time (Kopf's, ours), aware; None where it is none (older Kopfs store naive UTC times)."""
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.timezone.utc)


def _state(record: Mapping[str, Any] | None, kopf_progress: Mapping[str, Any] | None) -> str:
    """One word per handler: pending, retained, retrying, failed, succeeded, running, unreadable
    (its stored progress is malformed) or unknown."""
    conclusion = (record or {}).get("outcome")
    if (kopf_progress or {}).get("unreadable"):
        return "unreadable"
    if conclusion in ("pending", "retained"):
        return str(conclusion)
    kp = kopf_progress or {}
    if kp.get("success"):
        return "succeeded"
    if kp.get("failure") or conclusion == "fatal":
        return "failed"
    if kp.get("retries") or conclusion == "retry":
        return "retrying"
    if conclusion == "success":
        return "succeeded"
    return "running" if kp.get("started") else "unknown"


def _seconds_since(stamp: str, now: datetime.datetime) -> float:
    moment = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return max(0.0, (now - moment).total_seconds())
