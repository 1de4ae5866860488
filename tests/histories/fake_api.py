"""
A one-object API server for the generated histories: it stores the object, applies Kopf's PATCHes
(merge patches, and JSON patches with their ``test`` of the resourceVersion), bumps the
resourceVersion on every change, queues a watch event per change, and removes the object once it
is being deleted and has no finalizers left. It also plays the other actors: the user, another
operator, a crash of the operator between two of its writes.
"""
from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.histories import kopf_access
from tests.unit.kopf_objects import merged

FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
NAME, NAMESPACE, UID = "obj", "ns", "uid-1"


class Crashed(Exception):
    """The operator died at this write: the write and everything after it in the cycle is lost."""


@dataclass
class Event:
    type: str | None  # None: the initial listing after a (re)start, as Kopf marks it
    object: dict[str, Any]

    def raw(self) -> dict[str, Any]:
        return {"type": self.type, "object": copy.deepcopy(self.object)}


@dataclass
class FakeAPI:
    body: dict[str, Any] | None = None
    version: int = 0
    queue: list[Event] = field(default_factory=list)  # watch events not delivered yet
    versions: list[dict[str, Any]] = field(default_factory=list)  # every stored state, for stale events
    writes_left: int | None = None  # a crash at the write after these many (None: no crash)
    kopf_writes: int = 0
    refused: int = 0  # the operator's PATCHes refused (a JSON patch's failed test: a view too old)
    on_release: Callable[[], None] = lambda: None  # told when the operator's finalizer goes while deleting

    # --- the other actors ---------------------------------------------------------------------

    def create(self, spec: dict[str, Any]) -> None:
        self._store({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                     "metadata": {"name": NAME, "namespace": NAMESPACE, "uid": UID},
                     "spec": copy.deepcopy(spec)})

    def user_patch(self, patch: dict[str, Any]) -> None:
        if self.body is not None:
            self._store(merged(self.body, patch))

    def delete(self) -> None:
        if self.body is None or self.body["metadata"].get("deletionTimestamp"):
            return
        body = copy.deepcopy(self.body)
        body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        self._store(body)

    @property
    def finalized(self) -> bool:
        return self.body is not None and FINALIZER in self.body["metadata"].get("finalizers", [])

    # --- Kopf's side: the API client's PATCH ---------------------------------------------------

    async def patch(self, *, url: str, payload: Any, headers: dict[str, str] | None = None, **_: Any) -> Any:
        if self.writes_left is not None:
            if self.writes_left <= 0:
                raise Crashed(f"the operator died before its PATCH {payload!r}")
            self.writes_left -= 1
        if self.body is None:
            raise kopf_access.not_found()
        self.kopf_writes += 1
        subresource = url.rstrip("/").endswith("/status")
        if (headers or {}).get("Content-Type") == "application/json-patch+json":
            try:
                new = json_patched(self.body, payload)
            except Exception:
                self.refused += 1
                raise
        else:
            new = merged(self.body, {"status": payload.get("status")} if subresource else payload)
        return self._store(new)

    # --- the storage ---------------------------------------------------------------------------

    def _store(self, new: dict[str, Any]) -> dict[str, Any]:
        old = self.body
        if old is not None and _without_version(new) == _without_version(old):
            return copy.deepcopy(old)  # a write that changes nothing is no new version, no event
        was_finalized = self.finalized
        self.version += 1
        new = copy.deepcopy(new)
        new["metadata"]["resourceVersion"] = str(self.version)
        meta = new["metadata"]
        if "finalizers" in meta and not meta["finalizers"]:
            del meta["finalizers"]
        deleting = bool(meta.get("deletionTimestamp"))
        if deleting and was_finalized and FINALIZER not in meta.get("finalizers", []):
            self.on_release()
        if deleting and not meta.get("finalizers"):
            self.body = None
            self.queue.append(Event("DELETED", new))
        else:
            self.body = new
            self.queue.append(Event("MODIFIED" if old is not None else "ADDED", new))
        self.versions.append(new)
        return copy.deepcopy(new)


def _without_version(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "metadata": {k: v for k, v in body["metadata"].items() if k != "resourceVersion"}}


def json_patched(body: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902, as far as Kopf uses it; a failed ``test`` or a bad path is HTTP 422."""
    result = copy.deepcopy(body)
    for op in ops:
        *parents, last = [part.replace("~1", "/").replace("~0", "~") for part in op["path"].split("/")[1:]]
        try:
            container: Any = result
            for part in parents:
                container = container[int(part)] if isinstance(container, list) else container[part]
            if op["op"] == "test":
                current = container[int(last)] if isinstance(container, list) else container.get(last)
                if current != op["value"]:
                    raise kopf_access.unprocessable(f"test failed at {op['path']}: {current!r} != {op['value']!r}")
            elif op["op"] == "remove":
                del container[int(last) if isinstance(container, list) else last]
            elif op["op"] in ("add", "replace"):
                if isinstance(container, list):
                    index = len(container) if last == "-" else int(last)
                    if op["op"] == "add":
                        container.insert(index, copy.deepcopy(op["value"]))
                    else:
                        container[index] = copy.deepcopy(op["value"])
                else:
                    if op["op"] == "replace" and last not in container:
                        raise KeyError(last)
                    container[last] = copy.deepcopy(op["value"])
            else:
                raise kopf_access.unprocessable(f"unsupported op {op['op']!r}")
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise kopf_access.unprocessable(f"bad path {op['path']}: {exc!r}") from None
    return result
