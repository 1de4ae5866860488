"""
One object on a fake API server, and Kopf's real processing of its events: each event is the
object as the server has it, Kopf's PATCHes (merge-patches, and the JSON-patch of its finalizer
removal) are applied to it as the API server applies them. What a person, another operator or
time does between two events is done to the stored object.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import importlib.metadata
import json
from collections.abc import Iterator
from typing import Any

import kopf
import pytest

from kopf_outcomes._kopf import held, requeue
from kopf_outcomes._kopf.internals import operator_registry, operator_resource
from kopf_outcomes.memory import DEFAULT_KEYS
from tests.unit.kopf_objects import (
    NO_THROTTLING,
    api,
    configuration,
    ephemera,
    inventory,
    merged,
    processing,
    references,
)

RESOURCE = references.Resource("kopf.dev", "v1", "kopfexamples", namespaced=True)
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
# Before 1.38, Kopf's finalizer release goes into the cycle's patch before our memory's conclusion
# does: after a handler ran in a cycle, the memory cannot hold the finalizer there (held.py).
RELEASES_BEFORE_THE_MEMORY = pytest.mark.skipif(
    tuple(int(part) for part in importlib.metadata.version("kopf").split(".")[:2]) < (1, 38),
    reason="Kopf < 1.38 releases the finalizer in the cycle's patch before the memory's conclusion is in it")


def deleting(uid: str = "u1", **fields: Any) -> dict[str, Any]:
    """An object being deleted, with Kopf's finalizer (added by an earlier event)."""
    return {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", **fields,
            "metadata": {"name": "x", "namespace": "ns", "uid": uid, "resourceVersion": "1",
                         "deletionTimestamp": "2026-12-04T00:00:00Z", "finalizers": [FINALIZER],
                         **fields.pop("metadata", {})}}


class Server:
    """The stored object, and what Kopf sent."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.sent: list[Any] = []

    async def patch(self, *, payload: Any, **_: Any) -> dict[str, Any]:
        self.sent.append(copy.deepcopy(payload))
        if isinstance(payload, list):  # only Kopf >= 1.38 sends one, and it depends on jsonpatch
            import jsonpatch
            self.body = jsonpatch.apply_patch(self.body, payload)
        else:
            self.body = merged(self.body, copy.deepcopy(payload))
        meta = self.body["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        return copy.deepcopy(self.body)

    @property
    def finalized(self) -> bool:
        """Whether Kopf removed its finalizer."""
        return FINALIZER not in self.body["metadata"].get("finalizers", [])

    @property
    def annotations(self) -> dict[str, Any]:
        found: dict[str, Any] = self.body["metadata"].setdefault("annotations", {})
        return found

    def records(self) -> dict[str, Any]:
        raw = self.annotations.get(DEFAULT_KEYS.memory)
        return json.loads(raw) if raw else {}

    def age(self, seconds: float) -> None:
        """Time passes: each record's conclusion and deadline, and each of Kopf's delays, began that
        much earlier (rechecks, retries and deadlines are due)."""
        records = self.records()
        for record in records.values():
            record["since"] = _earlier(record["since"], seconds)
            if "deadline" in record:
                record["deadline"] = _earlier(record["deadline"], seconds)
        if records:
            self.annotations[DEFAULT_KEYS.memory] = json.dumps(records)
        for key, value in list(self.annotations.items()):
            if key.startswith("kopf.zalando.org/") and value.startswith("{"):
                self.annotations[key] = json.dumps(_aged(json.loads(value), seconds))
        progress = self.body.get("status", {}).get("kopf", {}).get("progress", {})
        for handler_id, state in progress.items():
            progress[handler_id] = _aged(state, seconds)


def _earlier(stamp: str, seconds: float) -> str:
    return (datetime.datetime.fromisoformat(stamp) - datetime.timedelta(seconds=seconds)).isoformat()


def _aged(state: dict[str, Any], seconds: float) -> dict[str, Any]:
    return {key: _earlier(value, seconds) if key in ("started", "delayed") and value else value
            for key, value in state.items()}


class NextEventWaiting(asyncio.Event):
    """The stream's pressure as the test has it: the next event is already there, so Kopf's sleeps
    (a delay, a consistency wait) end at once. Not ``set()``: Kopf 1.37 then skips the event's
    handlers altogether (a newer event replaces it); newer Kopf reads it only to wake its sleeps."""

    def is_set(self) -> bool:
        return False

    async def wait(self) -> bool:  # type: ignore[override]
        return True


class Operator:
    """An operator's registry and settings, processing the server's object one event at a time
    (with Kopf's ``all_at_once`` lifecycle unless a subclass chooses another)."""

    lifecycle = staticmethod(kopf.lifecycles.all_at_once)

    def __init__(self, server: Server, registry: kopf.OperatorRegistry,
                 settings: configuration.OperatorSettings | None = None) -> None:
        self.server = server
        self.registry = registry
        self.settings = settings or configuration.OperatorSettings()
        self.memories = inventory.ResourceMemories()  # Kopf's in-process memory: a restart loses it

    async def event(self) -> None:
        """Kopf processes one event of the object as the server has it now; the next one is
        already there (Kopf does not sleep for a delay: the test decides what comes next)."""
        known = operator_registry.set(self.registry)  # as Kopf's worker of the object has it (requeue.py)
        resource = operator_resource.set(RESOURCE)
        try:
            await self._process()
        finally:
            operator_resource.reset(resource)
            operator_registry.reset(known)

    async def _process(self) -> None:
        await asyncio.wait_for(processing.process_resource_event(
            lifecycle=self.lifecycle, indexers=processing.indexing.OperatorIndexers(),
            registry=self.registry, settings=self.settings, memories=self.memories, memobase=ephemera.Memo(),
            resource=RESOURCE, raw_event={"type": "MODIFIED", "object": copy.deepcopy(self.server.body)},
            event_queue=asyncio.Queue(), stream_pressure=NextEventWaiting(), **NO_THROTTLING), timeout=30)

    def restart(self) -> None:
        """A new process: nothing is known but what is in the object."""
        self.memories = inventory.ResourceMemories()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    """The fake API server, its object set by the test (``server.body = ...``). A grid point of a
    recheck that :meth:`Server.age` passed a second ago is due: a wide tolerance, not a timing."""
    found = Server(deleting())
    monkeypatch.setattr(api, "patch", found.patch)
    monkeypatch.setattr(requeue, "TOLERANCE", 30.0)
    held._told.clear()  # each test's object is told about once (they share the uid)
    yield found
