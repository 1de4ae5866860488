"""
Kopf's own per-handler progress, read from whichever storage the operator uses, through
Kopf's public storage classes (so the key mangling of long or odd handler ids stays Kopf's).
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal, cast

import kopf

Storage = Literal["annotations", "status", "both"]

DEFAULT_PREFIX = "kopf.zalando.org"
DEFAULT_STATUS_FIELD = "status.kopf.progress"
_PROGRESS_KEYS = {"started", "stopped", "delayed", "retries", "success", "failure", "message", "purpose"}


def storages_of(storage: Storage, prefix: str, status_field: str) -> list[tuple[str, kopf.ProgressStorage]]:
    """Where Kopf's progress is read from, in Kopf's order (as its MultiProgressStorage), each
    with the place it is named by when its value cannot be read."""
    annotations: tuple[str, kopf.ProgressStorage] = ("annotations", kopf.AnnotationsProgressStorage(prefix=prefix))
    status: tuple[str, kopf.ProgressStorage] = (status_field, kopf.StatusProgressStorage(field=status_field))
    return [annotations] if storage == "annotations" else [status] if storage == "status" else [annotations, status]


class Malformed(Exception):
    """One handler's stored progress is not what Kopf writes: said for that handler, the rest read."""


def read(body: Mapping[str, Any], handler_ids: Iterable[str], storage: Storage = "both",
         prefix: str = DEFAULT_PREFIX, status_field: str = DEFAULT_STATUS_FIELD) -> dict[str, dict[str, Any]]:
    """Kopf's progress record of each handler that has one: the known ids and those found in storage.
    A record that cannot be read (anyone may write anything there) is ``{"unreadable": why}``."""
    kopf_body = kopf.Body(cast(kopf.RawBody, dict(body)))
    readers = storages_of(storage, prefix, status_field)
    known = list(handler_ids)
    kopf_keys = {key for handler_id in known
                 for key in kopf.AnnotationsProgressStorage(prefix=prefix).make_keys(handler_id)}
    found_ids = [i for i in _found_ids(body, storage, prefix, status_field) if f"{prefix}/{i}" not in kopf_keys]
    ids = list(dict.fromkeys([*known, *found_ids]))
    found: dict[str, dict[str, Any]] = {}
    for handler_id in ids:
        try:
            record = _fetch(readers, handler_id, kopf_body)
        except Malformed as e:
            found[handler_id] = {"unreadable": str(e)}
            continue
        if record:
            found[handler_id] = record
    return found


def _fetch(readers: list[tuple[str, kopf.ProgressStorage]], handler_id: str,
           body: kopf.Body) -> dict[str, Any] | None:
    """The first storage's record, as Kopf's MultiProgressStorage reads it; Malformed naming the
    place where a value is not a record (not JSON, a list, a string)."""
    for place, reader in readers:
        try:
            record = reader.fetch(key=kopf.HandlerId(handler_id), body=body)
            if record:
                return {key: value for key, value in dict(record).items() if value is not None}
        except (ValueError, TypeError, AttributeError) as e:
            raise Malformed(f"the progress in {place} is malformed ({type(e).__name__}: {e})") from None
    return None


def _found_ids(body: Mapping[str, Any], storage: Storage, prefix: str, status_field: str) -> list[str]:
    """Handler ids of progress records that no memory names: exact from the status, and from the
    annotations as Kopf wrote their keys ("/" shows as ".", long ids end in a hash)."""
    ids: list[str] = []
    if storage in ("status", "both"):
        stanza: Any = body
        for key in status_field.split("."):
            stanza = stanza.get(key) if isinstance(stanza, Mapping) else None
        if isinstance(stanza, Mapping):
            ids.extend(str(key) for key, value in stanza.items() if isinstance(value, Mapping))
    if storage in ("annotations", "both"):
        for key, value in ((body.get("metadata") or {}).get("annotations") or {}).items():
            if key.startswith(f"{prefix}/") and _is_progress(value):
                ids.append(key[len(prefix) + 1:])
    return ids


def _is_progress(value: object) -> bool:
    try:
        data = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        return False
    return isinstance(data, dict) and bool(set(data) & _PROGRESS_KEYS) and set(data) <= _PROGRESS_KEYS | {"subrefs"}
