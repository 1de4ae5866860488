"""A shard's waiting gauge counts only the objects it serves (docs/howto/on-call.md): an object
relabelled to another shard leaves it. Where the API server selects (Kopf 1.45's label selectors)
the shard's watch gets a DELETED; where Kopf filters by the shard's label (Kopf < 1.45, or
``SHARD_SELECTION=client``), it still gets the object's events but runs none of its handlers, and
no cycle said so: the gauge counted the object here and on its new shard (read 2.0 for 1.0)."""
from __future__ import annotations

import asyncio
import functools
import types
from collections.abc import Iterator
from typing import Any

import kopf
import kopf_outcomes_prometheus
import pytest
from kopf._cogs.clients import api
from kopf._core.engines import indexing
from kopf._core.reactor import inventory
from kopf_outcomes_prometheus import plugin
from prometheus_client import CollectorRegistry

import kopf_outcomes
from kopf_outcomes import Pending, installation, shards
from kopf_outcomes._kopf import requeue
from tests.unit.kopf_objects import NO_THROTTLING, configuration, ephemera, lifecycles, processing, references

LABEL = "example.com/shard"
RESOURCE = references.Resource("kopf.dev", "v1", "kopfexamples", namespaced=True)


@pytest.fixture
def observer(monkeypatch: pytest.MonkeyPatch) -> Iterator[kopf_outcomes_prometheus.Observer]:
    """The Prometheus plugin, installed, in a registry of its own; shard ``a`` declared."""
    async def patch(**_: Any) -> dict[str, Any]:  # Kopf's writes: no cluster in unit tests
        return {"metadata": {"resourceVersion": "2"}}
    monkeypatch.setattr(api, "patch", patch)
    found = kopf_outcomes_prometheus.Observer(CollectorRegistry(), objects_reported=True)
    monkeypatch.setattr(kopf_outcomes_prometheus, "_observer", found)
    kopf_outcomes.install(plugins=[plugin], entry_points=False, events=False)
    try:
        yield found
    finally:
        kopf_outcomes.uninstall()
        shards.declared = None


def deleting(shard: str) -> dict[str, Any]:
    meta = {"name": "lost", "namespace": "ns", "uid": "u-lost", "resourceVersion": "1", "labels": {LABEL: shard},
            "finalizers": ["kopf.zalando.org/KopfFinalizerMarker"], "deletionTimestamp": "2026-12-06T00:00:00Z"}
    return {"type": "MODIFIED", "object": {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": meta}}


def shard_worker() -> tuple[asyncio.Queue[dict[str, Any] | None], asyncio.Queue[None], asyncio.Future[None]]:
    """Shard a's worker of one object, as the patch wraps Kopf's (its ``gone`` the installation's),
    processing each event through Kopf's own ``process_resource_event``."""
    registry = kopf.OperatorRegistry()
    labels = kopf_outcomes.shard(LABEL, "a")

    @kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, labels=labels)
    def delete_fn(**_: Any) -> Any:
        return Pending("waiting for the external system to call back")

    indexers = indexing.OperatorIndexers()
    processor = functools.partial(
        processing.process_resource_event, lifecycle=lifecycles.all_at_once, indexers=indexers,
        registry=registry, settings=configuration.OperatorSettings(), memories=inventory.ResourceMemories(),
        memobase=ephemera.Memo(), resource=RESOURCE, event_queue=asyncio.Queue(), **NO_THROTTLING)
    assert installation._patch is not None
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    processed: asyncio.Queue[None] = asyncio.Queue()

    async def kopf_worker(*, processor: Any, streams: Any, key: str) -> None:  # one worker: events in turn
        while (event := await queue.get()) is not None:
            await processor(raw_event=event)
            processed.put_nowait(None)
    worker = requeue.wrap_worker(kopf_worker, installation._patch._gone)(
        processor=processor, streams={"k": types.SimpleNamespace(backlog=asyncio.Queue())}, key="k")
    return queue, processed, asyncio.ensure_future(worker)


async def test_an_object_moved_to_another_shard_leaves_the_waiting_gauge_of_the_shard_it_left(
        observer: kopf_outcomes_prometheus.Observer) -> None:
    assert observer.waiting is not None
    queue, processed, worker = shard_worker()

    async def waiting_after(event: dict[str, Any]) -> int:
        queue.put_nowait(event)
        await processed.get()
        assert observer.waiting is not None
        return sum(observer.waiting.counts().values())

    try:
        assert await waiting_after(deleting("a")) == 1  # waits for its callback here
        assert await waiting_after(deleting("c")) == 0  # was: 1, though Kopf runs none of its handlers here
        assert await waiting_after(deleting("c")) == 0
        assert await waiting_after(deleting("a")) == 1  # back: its cycle counts it again
    finally:
        queue.put_nowait(None)
        await worker
