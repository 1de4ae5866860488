"""
Per-state handler memory: what state each handler last acted on, and what it concluded.

The memory lives in one annotation of the object, so it survives operator restarts and is
written in the same PATCH as Kopf's own progress. Its prefix ends in ``.kopf.zalando.org``,
which Kopf already treats as another operator's storage: writing it never looks like a
change of the object to Kopf, and never wakes anyone here either.
"""
from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import Any, Literal, TypedDict, cast

PREFIX = "outcomes.kopf.zalando.org"
MEMORY_ANNOTATION = f"{PREFIX}/memory"
RELEASE_ANNOTATION = f"{PREFIX}/release"

# Annotation prefixes Kopf uses for its own storages (and marks other Kopf operators' with).
_KOPF_PREFIX = "kopf.zalando.org"
_KOPF_MARKER = "kopf-managed"
_IGNORED_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})

Conclusion = Literal["pending", "retry", "success", "fatal", "retained"]


class Record(TypedDict):
    """What one handler concluded about one state of the object."""

    digest: str
    outcome: Conclusion
    reason: str


_CONCLUSIONS = frozenset({"pending", "retry", "success", "fatal", "retained"})
_reported_garbage: set[tuple[str, str]] = set()


def read(body: Mapping[str, Any], logger: logging.Logger | logging.LoggerAdapter[Any]) -> dict[str, Record]:
    """All handlers' records of this object; garbage is reported once and read as no memory."""
    annotations = (body.get("metadata") or {}).get("annotations")  # runs for every handler run
    if not annotations or MEMORY_ANNOTATION not in annotations:
        return {}
    raw = annotations[MEMORY_ANNOTATION]
    try:
        records = _parse(raw)
    except ValueError as e:
        uid, seen = str(body.get("metadata", {}).get("uid")), repr(raw)
        if (uid, seen) not in _reported_garbage:
            _reported_garbage.add((uid, seen))
            logger.warning(f"Ignoring the unreadable handler memory in {MEMORY_ANNOTATION!r}: {e}. "
                           f"Handlers of this object start with no memory.")
        return {}
    return records


def _parse(raw: object) -> dict[str, Record]:
    if not isinstance(raw, str):
        raise ValueError(f"expected a JSON string, got {type(raw).__name__}")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg} at position {e.pos})") from None
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object of handler ids, got {type(data).__name__}")
    for handler_id, record in data.items():
        if (
            not isinstance(record, dict)
            or not isinstance(record.get("digest"), str)
            or record.get("outcome") not in _CONCLUSIONS
            or not isinstance(record.get("reason"), str)
        ):
            raise ValueError(f"the record of handler {handler_id!r} is malformed: {record!r}")
    return cast(dict[str, Record], data)


def write(
    body: Mapping[str, Any],
    patch: MutableMapping[str, Any],
    handler_id: str,
    record: Record | None,
    logger: logging.Logger | logging.LoggerAdapter[Any],
) -> None:
    """Put one handler's record (or its removal) into the pending merge-patch, if it changes."""
    patched = patch.get("metadata", {}).get("annotations", {})
    if MEMORY_ANNOTATION in patched:
        pending = patched[MEMORY_ANNOTATION]
        records = _parse(pending) if pending is not None else {}
    else:
        records = read(body, logger)
    if records.get(handler_id) == record:
        return
    if record is None:
        records.pop(handler_id, None)
    else:
        records[handler_id] = record
    value = json.dumps(records, sort_keys=True, separators=(",", ":")) if records else None
    patch.setdefault("metadata", {}).setdefault("annotations", {})[MEMORY_ANNOTATION] = value


def release_requested(body: Mapping[str, Any], handler_id: str) -> bool:
    """Whether a person annotated the object to release this handler's retained finalizer."""
    value = body.get("metadata", {}).get("annotations", {}).get(RELEASE_ANNOTATION)
    if not isinstance(value, str):
        return False
    names = {name.strip() for name in value.split(",")}
    return handler_id in names or "*" in names


def digest(
    body: Mapping[str, Any],
    *,
    depends_on: Iterable[str] | None = None,
    excluded: Iterable[Sequence[str]] = (),
) -> str:
    """
    A short digest of the state a handler depends on.

    ``depends_on`` narrows it to field paths; by default it covers spec, labels, annotations
    and status, minus what the operator writes itself: Kopf's annotations and ``status.kopf``,
    our memory, and the ``excluded`` field paths (handler results, plugins' fields).
    """
    if depends_on is not None:
        state: object = {path: _resolve(body, path.split(".")) for path in depends_on}
    else:
        metadata = body.get("metadata", {})
        selected: dict[str, Any] = {
            "spec": body.get("spec"),
            "labels": metadata.get("labels"),
            "annotations": _foreign_annotations(metadata.get("annotations") or {}),
            "status": _without(body.get("status"), ["kopf"]),
        }
        for path in excluded:
            _remove(selected, list(path))
        # An emptied stanza is no stanza: {"status": {}} and no status at all are one state.
        state = {key: value for key, value in selected.items() if value not in (None, {})}
    encoded = json.dumps(state, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()[:16]


def _foreign_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """Annotations not written by Kopf, by Kopf-based operators, or by us."""
    operator_prefixes = {
        key.split("/", 1)[0] for key in annotations if key.endswith(f"/{_KOPF_MARKER}")
    }
    kept = {}
    for key, value in annotations.items():
        prefix = key.split("/", 1)[0] if "/" in key else ""
        if (
            key in _IGNORED_ANNOTATIONS
            or prefix == _KOPF_PREFIX
            or prefix.endswith(f".{_KOPF_PREFIX}")
            or prefix in operator_prefixes
        ):
            continue
        kept[key] = value
    return kept


def _without(value: object, keys: Iterable[str]) -> object:
    if not isinstance(value, Mapping):
        return value
    dropped = set(keys)
    return {key: val for key, val in value.items() if key not in dropped}


def _resolve(value: object, path: list[str]) -> object:
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _remove(selected: dict[str, Any], path: list[str]) -> None:
    """Remove a field path like ``status.conditions`` without touching the object's own dicts."""
    if path[:1] == ["metadata"]:
        path = path[1:]
    container = selected
    for key in path[:-1]:
        child = container.get(key)
        if not isinstance(child, Mapping):
            return
        container[key] = child = dict(child)  # copy on write: the body stays as it was
        container = child
    if path:
        container.pop(path[-1], None)
