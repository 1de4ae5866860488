"""
Every handler's latest outcome as a status condition of its object, by the Kubernetes API
conventions, plus the summary condition ``HandlersSucceeded`` for ``kubectl wait``.

Written into the same PATCH as Kopf's own changes; ``status.conditions`` is declared as this
plugin's own field, so writing it never wakes a parked handler.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

from kopf_outcomes import Fatal, HandlerRun, Outcome, Pending, Retry, Success, hookimpl
from kopf_outcomes import memory as _memory
from kopf_outcomes.finalizer import retains
from kopf_outcomes_conditions import concluded, foreign
from kopf_outcomes_conditions.conventions import SUMMARY, condition_type, merged, now, summary, summary_type, updated

__all__ = ["FIELD", "SUMMARY", "condition_type", "summary_type"]

FIELD = "status.conditions"


@hookimpl
def kopf_outcomes_owned_fields() -> Iterable[str]:
    return [FIELD]


@hookimpl
def kopf_outcomes_observe_outcome(run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]) -> None:
    if run.body is None or run.reason is None:
        return  # activities, daemons, timers, watchers: no condition of the object describes them
    before = foreign.conditions(run.body, patch)
    if before is None:
        return  # another tool's shape of status.conditions: left as it is (foreign says so, once)
    status, reason, message = describe(run, outcome, patch)
    metadata = run.body.get("metadata") or {}
    generation = metadata.get("generation")
    finalizer = run.finalizer
    at, kind, total = now(), condition_type(run.handler_id, finalizer), summary_type(finalizer)
    conditions = merged(before, updated(_find(before, kind), kind, status, reason, message, generation, at))
    if not isinstance(outcome, (Pending, Retry)):
        concluded.add(patch, run.handler_id)
    others = [c for c in conditions if not (isinstance(c, dict) and c.get("type") == total)]  # the summary last
    siblings = concluded.siblings(run, patch)
    conditions = [*others, summary(others, generation, _find(before, total), at, finalizer, siblings)]
    if conditions != before:
        status_patch = patch.get("status")
        if not isinstance(status_patch, MutableMapping):
            status_patch = patch["status"] = {}
        status_patch["conditions"] = conditions


def describe(run: HandlerRun, outcome: Outcome, patch: Mapping[str, Any] | None = None) -> tuple[str, str, str]:
    """Status, reason and a message a person can act on."""
    handler = f"Handler {run.handler_id!r}"
    if isinstance(outcome, Success):
        return "True", "Succeeded", f"{handler} succeeded."
    if isinstance(outcome, Pending):
        fields = run.options.depends_on
        change = f"any of {', '.join(fields)} changes" if fields else "the object changes"
        recheck = f", and every {outcome.recheck:g} s" if outcome.recheck is not None else ""
        return "False", "Pending", f"{handler} is pending: {outcome.reason}. It runs again when {change}{recheck}."
    if isinstance(outcome, Retry):
        return "False", "Retrying", (f"{handler} failed temporarily (attempt {run.retry + 1}): {outcome.reason}. "
                                     f"It is retried in {outcome.delay:g} s.")
    if isinstance(outcome, Fatal) and retains(run.kind, run.reason, outcome.on_delete, run.options):
        return "False", "FinalizerRetained", (
            f"{handler} failed permanently: {outcome.reason}. The finalizer is retained until a person "
            f"releases it, after fixing the cause: {release_command(run, patch or {})}")
    if isinstance(outcome, Fatal):
        return "False", "Failed", f"{handler} failed permanently: {outcome.reason}."
    return "Unknown", "Unknown", f"{handler} ended with an outcome of unknown type {type(outcome).__name__}."


def release_command(run: HandlerRun, patch: Mapping[str, Any]) -> str:
    """The exact command that releases this retention: it carries the retention's stamp."""
    metadata = (run.body or {}).get("metadata") or {}
    resource = run.resource
    kind = f"{resource.plural}.{resource.group}" if resource is not None and resource.group else (
        resource.plural if resource is not None else "OBJECT")
    namespace = f" -n {metadata['namespace']}" if metadata.get("namespace") else ""
    annotation, record = retention(run, patch)
    value = _memory.release_value(run.handler_id, record or {})
    return f"kubectl annotate --overwrite {kind} {metadata.get('name', 'NAME')}{namespace} {annotation}={value}"


def retention(run: HandlerRun, patch: Mapping[str, Any]) -> tuple[str, Mapping[str, Any] | None]:
    """The release annotation of the operator that retains it, and its retained record: each
    operator's memory keys derive from its finalizer; the one whose memory (in this cycle's patch)
    says "retained" is it."""
    metadata = (run.body or {}).get("metadata") or {}
    annotations = {**(metadata.get("annotations") or {}), **(patch.get("metadata") or {}).get("annotations", {})}
    for finalizer in metadata.get("finalizers") or []:
        keys = _memory.keys_for(finalizer)
        raw = annotations.get(keys.memory)
        try:
            found = _memory.parse(raw).get(run.handler_id) if raw else None
        except ValueError:
            continue
        if found is not None and found["outcome"] == "retained":
            return keys.release, found
    return _memory.DEFAULT_KEYS.release, None


def _find(conditions: Iterable[object], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if isinstance(c, dict) and c.get("type") == kind), None)
