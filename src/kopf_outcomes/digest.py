"""
The state a handler depends on, as a short digest: what per-state memory compares.

The default scope is spec, labels, annotations and status, minus everything the operator writes
itself (Kopf's progress, diff-base and touch-dummy, other Kopf operators' storages in annotations
and in status, our memory, handler results, fields that plugins write). A handler or policy can narrow it to field paths
(``depends_on``) and leave field paths out of it (``ignore``).
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kopf_outcomes import paths

# Annotation prefixes Kopf uses for its own storages (and marks other Kopf operators' with).
_KOPF_PREFIX = "kopf.zalando.org"
_KOPF_MARKER = "kopf-managed"
_IGNORED_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})


def hashed(value: object, length: int = 16) -> str:
    encoded = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()[:length]


def state(
    body: Mapping[str, Any],
    *,
    depends_on: Iterable[str] | None = None,
    excluded: Iterable[Sequence[str]] = (),
    excluded_prefixes: Iterable[str] = (),
    patch: Mapping[str, Any] | None = None,
    ignore: Iterable[str] = (),
) -> dict[str, Any]:
    """
    The state a handler depends on.

    ``depends_on`` narrows it to field paths; by default it covers spec, labels, annotations
    and status, minus what the operator writes itself: Kopf's annotations and ``status.kopf``,
    our memory, the ``excluded`` field paths (handler results, storages' and plugins' fields)
    and annotations under ``excluded_prefixes`` (the operator's storages). ``ignore``: field
    paths left out in either case (what the handler writes itself through another client). With
    ``patch``, of the object as it will be once the cycle's pending merge-patch is applied: what
    the operator writes in a cycle is then part of the state it concluded about, never a change.
    """
    if patch:
        body = patched(body, patch)
    if depends_on is not None:
        chosen = {path: paths.resolve(body, path) for path in depends_on}
        for path in ignore:
            _ignore(chosen, paths.parse(path))
        return chosen
    metadata = body.get("metadata", {})
    selected: dict[str, Any] = {
        "spec": body.get("spec"),
        "labels": metadata.get("labels"),
        "annotations": _foreign_annotations(metadata.get("annotations") or {}, excluded_prefixes),
        "status": _without_status_storages(_without(body.get("status"), ["kopf"])),
    }
    for segments in excluded:
        _remove(selected, list(segments))
    for ignored in ignore:
        _remove(selected, list(paths.parse(ignored)))
    # An emptied stanza is no stanza: {"status": {}} and no status at all are one state.
    return {key: value for key, value in selected.items() if value not in (None, {})}


def parts(chosen: Mapping[str, Any]) -> dict[str, str]:
    """A short digest of each part of a state, by field path (``status.phase``, ``spec``):
    comparing two tells which paths changed (what woke a handler), at a few bytes per part."""
    found: dict[str, str] = {}
    for key, value in chosen.items():
        top = paths.parse(_TOP.get(key, key))
        if isinstance(value, Mapping) and value:
            found.update((paths.dotted((*top, str(child))), hashed(item, 8)) for child, item in value.items())
        else:
            found[paths.dotted(top)] = hashed(value, 8)
    return found


# The default scope's parts, by the paths a user names them with.
_TOP = {"labels": "metadata.labels", "annotations": "metadata.annotations"}


def _ignore(chosen: dict[str, Any], segments: tuple[str, ...]) -> None:
    """Leave a path out of a ``depends_on`` state: the whole of one, or a part of one."""
    for path in list(chosen):
        prefix = paths.parse(path)
        if segments[:len(prefix)] == prefix:
            if len(segments) == len(prefix):
                del chosen[path]
            elif isinstance(chosen[path], Mapping):
                holder: dict[str, Any] = {"value": chosen[path]}
                _remove(holder, ["value", *segments[len(prefix):]])
                chosen[path] = holder.get("value")


def patched(body: Mapping[str, Any], patch: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object with a JSON merge-patch applied (``None`` removes), copying only what changes."""
    merged: Mapping[str, Any] = _merged(body, patch)  # type: ignore[assignment]  # a mapping merged is one
    return merged


def _merged(value: object, patch: object) -> object:
    if not isinstance(patch, Mapping):
        return patch
    merged = dict(value) if isinstance(value, Mapping) else {}
    for key, change in patch.items():
        if change is None:
            merged.pop(key, None)
        else:
            merged[key] = _merged(merged.get(key), change)
    return merged


def _foreign_annotations(annotations: Mapping[str, str], excluded_prefixes: Iterable[str] = ()) -> dict[str, str]:
    """Annotations not written by Kopf, by Kopf-based operators, or by us."""
    operator_prefixes = {
        key.split("/", 1)[0] for key in annotations if key.endswith(f"/{_KOPF_MARKER}")
    }
    operator_prefixes.update(excluded_prefixes)
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


# Kopf's progress record (``ProgressRecord``): a status storage of any operator holds these per handler.
_PROGRESS_KEYS = frozenset({"started", "stopped", "delayed", "purpose", "retries", "success", "failure",
                            "message", "subrefs"})
_DIFFBASE, _PROGRESS, _DUMMY = "last-handled-configuration", "progress", "dummy"


def _without_status_storages(status: object) -> object:
    """The status without Kopf's status storages of any operator (``status.<name>.progress``,
    ``.last-handled-configuration`` and ``.dummy``, Kopf's own field names): another operator's
    bookkeeping, or this one's before its storage moved. Its fields do not say whose they are,
    so a stanza counts as a storage by Kopf's names and shapes together: a ``progress`` of
    Kopf's progress records (none: an operator done with the object, its records purged), a
    ``last-handled-configuration`` string; a ``dummy`` beside either."""
    if not isinstance(status, Mapping):
        return status
    kept: dict[str, Any] | None = None
    for name, stanza in status.items():
        if not isinstance(stanza, Mapping):
            continue
        storage = {key for key in (_PROGRESS, _DIFFBASE) if key in stanza and _bookkeeping(key, stanza[key])}
        if not storage:
            continue
        if isinstance(stanza.get(_DUMMY), str):
            storage.add(_DUMMY)
        kept = dict(status) if kept is None else kept
        kept[name] = {key: value for key, value in stanza.items() if key not in storage}
        if not kept[name]:
            del kept[name]
    return status if kept is None else kept


def _bookkeeping(key: str, value: object) -> bool:
    if key == _DIFFBASE:
        return isinstance(value, str)
    return (isinstance(value, Mapping)  # empty: as Kopf leaves it once it purged its last record
            and all(isinstance(record, Mapping) and record.keys() <= _PROGRESS_KEYS for record in value.values()))


def _without(value: object, keys: Iterable[str]) -> object:
    if not isinstance(value, Mapping):
        return value
    dropped = set(keys)
    return {key: val for key, val in value.items() if key not in dropped}


def _remove(selected: dict[str, Any], path: list[str]) -> None:
    """Remove a field path like ``status.conditions`` without touching the object's own dicts;
    a stanza emptied by it goes too (``{"my-op": {}}`` left by a storage's field is no state)."""
    if path[:1] == ["metadata"]:
        path = path[1:]
    if not path:
        return
    key, rest = path[0], path[1:]
    if not rest:
        selected.pop(key, None)
        return
    child = selected.get(key)
    if not isinstance(child, Mapping):
        return
    child = dict(child)  # copy on write: the body stays as it was
    _remove(child, rest)
    if child:
        selected[key] = child
    else:
        selected.pop(key)
