"""Wake-ups never late, never lost (issue 43, findings 1 and 2), through Kopf's real processing of a
child's event: the parents that wait on a child learn of its change when Kopf's index does, not
after the child's own handlers; and which parents a child left is known whatever the limits."""
from __future__ import annotations

import asyncio
import functools
import types
from collections.abc import Iterator
from typing import Any

import kopf
import pytest
from kopf._cogs.clients import api
from kopf._core.engines import indexing
from kopf._core.reactor import inventory

import kopf_outcomes
from kopf_outcomes import Pending, objects
from kopf_outcomes._kopf import dependents, held, requeue
from tests.unit.kopf_objects import NO_THROTTLING, configuration, ephemera, lifecycles, processing, references

PARENT = "example.com/parent"
RESOURCE = references.Resource("kopf.dev", "v1", "kopfexamples", namespaced=True)


@pytest.fixture
def patched(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    async def patch(**_: Any) -> dict[str, Any]:  # Kopf's progress writes: no cluster in unit tests
        return {"metadata": {"resourceVersion": "2"}}
    monkeypatch.setattr(api, "patch", patch)
    kopf_outcomes.install(entry_points=False, events=False)
    yield
    kopf_outcomes.uninstall()


def child_event(name: str, parent: str, kind: str = "MODIFIED") -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "uid": f"u-{name}", "resourceVersion": "1",
            "labels": {PARENT: parent, "role": "child"}}
    return {"type": kind, "object": {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": meta}}


def parent_body(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "labels": {"role": "parent"}}}


def operator(child_fn: Any) -> tuple[kopf.OperatorRegistry, objects.Source]:
    """Parents that wait for their children (found by a per-parent label), and the children's own
    change handler ``child_fn``."""
    registry = kopf.OperatorRegistry()
    source = kopf_outcomes.selected("kopf.dev", "v1", "kopfexamples", labels={PARENT: "{metadata.name}"})

    @kopf_outcomes.depends_on_objects(source, registry=registry)
    @kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, labels={"role": "parent"})
    def delete_parent(**_: Any) -> Any:
        return Pending("children remain") if kopf_outcomes.recall().objects else None

    kopf.on.create("kopf.dev", "v1", "kopfexamples", registry=registry, labels={"role": "child"})(child_fn)
    kopf.on.update("kopf.dev", "v1", "kopfexamples", registry=registry, labels={"role": "child"})(child_fn)
    return registry, source


def worker_of(registry: kopf.OperatorRegistry) -> Any:
    """Kopf's per-object worker as the patch wraps it, processing each event through Kopf's own
    ``process_resource_event`` (indices, then the object's handlers)."""
    return worker_and_processor(registry)[0]


def worker_and_processor(registry: kopf.OperatorRegistry) -> tuple[Any, functools.partial[Any]]:
    """:func:`worker_of`, and the processor it passes each event to (Kopf's watcher is given it)."""
    indexers = indexing.OperatorIndexers()
    indexers.ensure(registry._indexing.get_all_handlers())
    processor = functools.partial(
        processing.process_resource_event, lifecycle=lifecycles.all_at_once, indexers=indexers,
        registry=registry, settings=configuration.OperatorSettings(), memories=inventory.ResourceMemories(),
        memobase=ephemera.Memo(), resource=RESOURCE, event_queue=asyncio.Queue(), **NO_THROTTLING)

    async def process(event: dict[str, Any]) -> None:
        async def kopf_worker(*, processor: Any, streams: Any, key: str) -> None:
            await processor(raw_event=event)
        await requeue.wrap_worker(kopf_worker, lambda resource, body: None)(
            processor=processor, streams={"k": types.SimpleNamespace(backlog=asyncio.Queue())}, key="k")
    return process, processor


async def test_a_childs_change_wakes_its_parent_before_the_childs_own_handler_returns(patched: None) -> None:
    """Finding 1: the child's own handler waits (here: until the test lets it go); its parent must
    learn of the change while it does, not when it returns (a recheck interval later, or never)."""
    entered, leave = asyncio.Event(), asyncio.Event()

    async def child_fn(**_: Any) -> Any:
        entered.set()
        await leave.wait()  # as long as its own wait (a recheck=, its own depends_on_objects) lasts

    registry, source = operator(child_fn)
    woken = asyncio.Event()
    forget = objects.wait(source.wake_keys(parent_body("a")), woken)
    try:
        processing_child = asyncio.create_task(worker_of(registry)(child_event("c1", "a")))
        await asyncio.wait_for(entered.wait(), timeout=10)
        assert woken.is_set()  # was: not yet, only after the child's own handler returned
        leave.set()
        await processing_child
    finally:
        forget()


async def test_a_quiet_child_moved_between_parents_wakes_the_one_it_left_whatever_the_limits(
        patched: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding 2: many watched objects since the child was last seen (here a bounded memory of one)
    must not make its former parent miss that it left."""
    for module, limit in ((objects, "LAST_KEYS_LIMIT"), (dependents, "SEEN_LIMIT"), (held, "TOLD_LIMIT")):
        monkeypatch.setattr(module, limit, 1, raising=False)

    async def child_fn(**_: Any) -> Any:
        return None

    registry, source = operator(child_fn)
    process = worker_of(registry)
    await process(child_event("c1", "a", kind=None))  # Kopf's listing: a child of a
    await process(child_event("other", "z", kind=None))  # another watched object, seen since
    woken = {name: asyncio.Event() for name in "ab"}
    forgets = [objects.wait(source.wake_keys(parent_body(name)), event) for name, event in woken.items()]
    try:
        await process(child_event("c1", "b"))  # relabelled from a to b
        assert woken["b"].is_set()
        assert woken["a"].is_set()  # was: a forgot it and waited for a child that had left
    finally:
        for forget in forgets:
            forget()
        await process(child_event("c1", "b", kind="DELETED"))
        await process(child_event("other", "z", kind="DELETED"))
    assert "u-c1" not in objects._last_keys and "u-other" not in objects._last_keys  # forgotten as they go
