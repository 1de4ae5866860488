"""
The operator's start with many watched objects (issue 43: 5,000 children did not start in 5.5
minutes): Kopf's real watcher lists N objects of an indexed resource, and every object's worker
waits until the operator's indices are listed. The work per object must not grow with N.

Counted, not timed: how often the operator's readiness is evaluated (``ToggleSet.is_on``) until
every object's event has been processed. Every creation and dropping of an object's toggle
notifies the set; Kopf's own wait had each notification wake every waiting worker (quadratic).
"""
from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import kopf
import pytest
from kopf._cogs.clients import watching

import kopf_outcomes
from tests.unit.kopf_objects import (
    NO_THROTTLING,
    aiotoggles,
    configuration,
    ephemera,
    indexing,
    inventory,
    lifecycles,
    processing,
    queueing,
    references,
)

CONFIGMAPS = references.Resource("", "v1", "configmaps", kind="ConfigMap", namespaced=True,
                                 verbs=["list", "watch", "patch"])
PARENT = "example.com/parent"


@pytest.fixture
def patched() -> Iterator[None]:
    kopf_outcomes.install(entry_points=False, events=False)
    yield
    kopf_outcomes.uninstall()


def children(count: int) -> list[dict[str, Any]]:
    """A listing's events: ``count`` ConfigMaps, ten per parent, as the wakeups benchmark has them."""
    return [{"type": None, "object": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"state": "running"},
                                      "metadata": {"name": f"c-{i}", "namespace": "ns", "uid": f"u-{i}",
                                                   "resourceVersion": "1", "labels": {PARENT: f"p-{i // 10}"}}}}
            for i in range(count)]


async def readiness_checks(count: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """Kopf's watcher over a listing of ``count`` children, up to the last one processed: how many
    times the operator's readiness was evaluated."""
    registry = kopf.OperatorRegistry()

    @kopf_outcomes.depends_on_objects(kopf_outcomes.selected("v1", "configmaps", labels={PARENT: "{metadata.name}"},
                                                             fields=["data.state"]), registry=registry)
    @kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry)
    def delete_parent(**_: Any) -> None:
        pass

    async def listing(**_: Any) -> AsyncIterator[Any]:
        for event in children(count):
            yield event
        yield watching.Bookmark.LISTED
        await asyncio.Event().wait()
    monkeypatch.setattr(watching, "infinite_watch", listing)

    checks = 0
    is_on = aiotoggles.ToggleSet.is_on

    def counted(self: Any) -> bool:
        nonlocal checks
        checks += 1
        return is_on(self)
    monkeypatch.setattr(aiotoggles.ToggleSet, "is_on", counted)

    indexers = indexing.OperatorIndexers()
    indexers.ensure(registry._indexing.get_all_handlers())
    processed: set[str] = set()
    all_processed = asyncio.Event()

    async def processor(**kwargs: Any) -> None:
        await processing.process_resource_event(
            lifecycle=lifecycles.all_at_once, indexers=indexers, registry=registry,
            settings=configuration.OperatorSettings(), memories=memories, memobase=ephemera.Memo(),
            resource=CONFIGMAPS, event_queue=asyncio.Queue(), **NO_THROTTLING, **kwargs)
        processed.add(kwargs["raw_event"]["object"]["metadata"]["uid"])
        if len(processed) == count:
            all_processed.set()
    memories = inventory.ResourceMemories()

    indexed = aiotoggles.ToggleSet(all)
    blocker = await indexed.make_toggle(name="orchestration blocker")
    watcher = asyncio.create_task(queueing.watcher(
        namespace="ns", settings=configuration.OperatorSettings(), resource=CONFIGMAPS,
        processor=functools.partial(processor), operator_indexed=indexed,
        resource_indexed=await indexed.make_toggle(name="configmaps")))
    await indexed.drop_toggle(blocker)
    try:
        await asyncio.wait_for(all_processed.wait(), timeout=120)
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    assert len(processed) == count  # every object was processed: none was left waiting
    return checks


async def test_the_start_evaluates_readiness_a_number_of_times_linear_in_the_objects(
        patched: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Twice the objects, at most a little more than twice the work (Kopf's own wait: four times)."""
    small = await readiness_checks(200, monkeypatch)
    large = await readiness_checks(400, monkeypatch)
    assert large <= 2.2 * small, f"200 objects: {small} readiness checks; 400: {large} (quadratic)"


async def test_a_waiter_cancelled_leaves_the_others_waiting_and_the_last_leaves_no_wait_behind(
        patched: None) -> None:
    """Guard: one shared wait on the condition; a cancelled waiter does not end it for the others,
    the others return when the state holds, and when the last one is cancelled the wait ends too."""
    toggles = aiotoggles.ToggleSet(all)
    toggle = await toggles.make_toggle(name="a listing")
    first, second = (asyncio.create_task(toggles.wait_for(True)) for _ in range(2))
    await asyncio.sleep(0.01)
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    assert not second.done()
    await toggles.drop_toggle(toggle)
    await asyncio.wait_for(second, timeout=5)

    await toggles.make_toggle(name="another listing")
    before = asyncio.all_tasks()
    third = asyncio.create_task(toggles.wait_for(True))
    await asyncio.sleep(0.01)
    third.cancel()
    await asyncio.gather(third, return_exceptions=True)
    await asyncio.sleep(0)
    assert asyncio.all_tasks() <= before  # the shared wait was cancelled with its last waiter


async def test_a_waiter_that_comes_as_the_last_one_leaves_waits_and_is_not_cancelled(patched: None) -> None:
    """Guard: the shared wait cancelled with its last waiter is not handed to one that comes while
    that cancellation is under way: the newcomer waits, and returns when the state holds."""
    toggles = aiotoggles.ToggleSet(all)
    toggle = await toggles.make_toggle(name="a listing")
    leaving = asyncio.create_task(toggles.wait_for(True))
    await asyncio.sleep(0.01)
    leaving.cancel()
    coming = asyncio.create_task(toggles.wait_for(True))  # it starts right after the leaving one's cleanup
    await asyncio.gather(leaving, return_exceptions=True)
    await asyncio.sleep(0.01)
    await toggles.drop_toggle(toggle)
    await asyncio.wait_for(coming, timeout=5)  # not CancelledError
