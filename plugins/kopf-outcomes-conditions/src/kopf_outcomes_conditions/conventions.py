"""
Conditions by the Kubernetes API conventions (``metav1.Condition``): CamelCase types and
reasons, status "True"/"False"/"Unknown", ``observedGeneration``, and ``lastTransitionTime``
that moves only when the status does; and within its limits, which the API server enforces on a
CRD with the standard condition schema by rejecting the whole status PATCH (Kopf's own progress
included): a type of at most 316 characters in all (a qualified name: an optional DNS prefix of at
most 253 and a name of at most 63, so a 253-character prefix leaves 62 for the name), a reason of
at most 1024 by its pattern, a message of at most 32768.

One operator's conditions are its own: an operator with a finalizer other than Kopf's default
qualifies its types with a prefix derived from that finalizer (as its memory's keys are derived),
so that two operators on one resource whose handlers share an id never overwrite each other's
condition, and each has its own summary.
"""
from __future__ import annotations

import datetime
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

SUMMARY = "HandlersSucceeded"
SUFFIX = "Succeeded"
DEFAULT_FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"

# The reasons this plugin writes; with the type suffix they tell its conditions from others'.
REASONS = frozenset({"Succeeded", "Pending", "Retrying", "Failed", "FinalizerRetained", "Waiting"})

# metav1.Condition's limits (k8s.io/apimachinery/pkg/apis/meta/v1/types.go).
MAX_MESSAGE = 32768
MAX_REASON = 1024
MAX_NAME = 63  # the name part of a qualified name
MAX_PREFIX = 253  # a DNS subdomain
MAX_TYPE = 316  # the whole type: a 253-character prefix leaves 62 for the name, not 63
TRUNCATED = " [truncated]"
REASON_PATTERN = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_WORD = re.compile(r"[A-Za-z0-9]+")


def condition_type(handler_id: str, finalizer: str | None = None) -> str:
    """``delete_fn`` → ``DeleteFnSucceeded``; ``create_fn/sub-1`` → ``CreateFnSub1Succeeded``;
    for another operator than Kopf's default one, qualified by :func:`prefix`. A name too long
    for the API (with its prefix) keeps its start and ends with a digest of the whole, so names
    stay apart."""
    words = _WORD.findall(handler_id) or ["Handler"]
    camel = "".join(word[:1].upper() + word[1:] for word in words)
    if camel[:1].isdigit():
        camel = "Handler" + camel
    own = prefix(finalizer)
    longest = min(MAX_NAME, MAX_TYPE - len(own) - 1) if own else MAX_NAME
    if len(camel) + len(SUFFIX) > longest:
        digest = hashlib.sha256(handler_id.encode()).hexdigest()[:8]
        camel = camel[:longest - len(SUFFIX) - len(digest)] + digest
    return f"{own}/{camel}{SUFFIX}" if own else camel + SUFFIX


def summary_type(finalizer: str | None = None) -> str:
    return qualified(SUMMARY, finalizer)


def qualified(name: str, finalizer: str | None) -> str:
    own = prefix(finalizer)
    return f"{own}/{name}" if own else name


def prefix(finalizer: str | None) -> str:
    """The operator's prefix of condition types: none for Kopf's default finalizer; else the
    finalizer as a DNS subdomain (``acme.example.com/cleanup`` → ``cleanup.acme.example.com``),
    or, where it cannot be one, a digest of it under ``outcomes.kopf.zalando.org``."""
    if not finalizer or finalizer == DEFAULT_FINALIZER:
        return ""
    domain, _, name = finalizer.rpartition("/")
    candidate = ".".join(part for part in (name, domain) if part).lower()
    labels = candidate.split(".")
    if len(candidate) <= MAX_PREFIX and all(_LABEL.fullmatch(label) and len(label) <= 63 for label in labels):
        return candidate
    return f"{hashlib.sha256(finalizer.encode()).hexdigest()[:10]}.outcomes.kopf.zalando.org"


def split(kind: str) -> tuple[str, str]:
    """A type's prefix ("" if none) and name."""
    own, _, name = kind.rpartition("/")
    return own, name


def message(text: str) -> str:
    """A message within the API's limit; a longer one keeps its start and ends with a mark."""
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - len(TRUNCATED)] + TRUNCATED


def reason(text: str) -> str:
    """A reason by the API's pattern and limit (this plugin's own are; anything else is cut)."""
    if len(text) <= MAX_REASON and REASON_PATTERN.fullmatch(text):
        return text
    cleaned = re.sub(r"[^A-Za-z0-9_,:]", "", text).lstrip("0123456789_,:")[:MAX_REASON].rstrip(",:")
    return cleaned or "Unknown"


def is_ours(condition: Mapping[str, Any], finalizer: str | None = None) -> bool:
    """A handler's condition written by this plugin for this operator (not its summary)."""
    kind, why = condition.get("type"), condition.get("reason")
    if not isinstance(kind, str) or not isinstance(why, str) or why not in REASONS:
        return False
    own, name = split(kind)
    return own == prefix(finalizer) and name.endswith(SUFFIX) and name != SUMMARY


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def updated(current: Mapping[str, Any] | None, kind: str, status: str, why: str, text: str,
            generation: int | None, at: str) -> dict[str, Any]:
    """The condition as it should be, within the API's limits; ``lastTransitionTime`` kept
    unless the status changes."""
    reason_, message_ = reason(why), message(text)
    condition: dict[str, Any] = {"type": kind, "status": status, "reason": reason_, "message": message_}
    if generation is not None:
        condition["observedGeneration"] = generation
    same_status = current is not None and current.get("status") == status and current.get("lastTransitionTime")
    condition["lastTransitionTime"] = current["lastTransitionTime"] if same_status and current else at
    return condition


def summary(conditions: Iterable[object], generation: int | None, current: Mapping[str, Any] | None,
            at: str, finalizer: str | None = None, siblings: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """``HandlersSucceeded``: True only when every handler condition of this operator is True and
    every other handler of the cause (``siblings``, by id: concluded or not) has concluded; its
    ``observedGeneration`` then the oldest of the cause's handlers' (what all of them have seen).
    Else False, naming what it waits for; "Unknown" where the cause's other handlers are not known."""
    kind = summary_type(finalizer)
    ours = {str(c["type"]): c for c in conditions if isinstance(c, Mapping) and is_ours(c, finalizer)}
    waiting = [c for c in ours.values() if c.get("status") != "True"]
    to_run = [condition_type(handler_id, finalizer) for handler_id, done in (siblings or {}).items() if not done]
    to_run = [name for name in to_run if name not in ours or ours[name].get("status") == "True"]
    if not waiting and not to_run:
        if siblings is None:
            return updated(current, kind, "Unknown", "Unknown", "Whether other handlers of this cause are still "
                           "to run is not known.", generation, at)
        seen = [ours[name].get("observedGeneration") for name in map(_type_of(finalizer), siblings) if name in ours]
        oldest = min([g for g in [generation, *seen] if isinstance(g, int)], default=generation)
        return updated(current, kind, "True", "Succeeded", "All handlers succeeded.", oldest, at)
    names = ", ".join(split(str(name))[1][: -len(SUFFIX)] for name in [*(c["type"] for c in waiting), *to_run])
    if waiting:
        first = waiting[0]
        text = (f"Waiting for {len(waiting) + len(to_run)} handler(s): {names}. "
                f"{first['type']}: {first.get('message', '')}")
    else:
        text = f"Waiting for {len(to_run)} handler(s): {names}. {to_run[0]}: not concluded in this cause yet."
    why = str(waiting[0]["reason"]) if len(waiting) == 1 and not to_run else "Waiting"
    return updated(current, kind, "False", why, text.strip(), generation, at)


def _type_of(finalizer: str | None) -> Callable[[str], str]:
    return lambda handler_id: condition_type(handler_id, finalizer)


def merged(conditions: list[object], condition: dict[str, Any]) -> list[object]:
    """Replace the condition of the same type in place, or append it; entries of other shapes
    (another tool's) are kept where they are."""
    def same(entry: object) -> bool:
        return isinstance(entry, Mapping) and entry.get("type") == condition["type"]
    if any(same(c) for c in conditions):
        return [condition if same(c) else c for c in conditions]
    return [*conditions, condition]
