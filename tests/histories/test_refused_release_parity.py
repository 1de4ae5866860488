"""
Stock parity of a refused release (docs/safety.md, "Where the object shows no wait of the
handler"): the same history through Kopf's real processing and the one-object fake API server, on
stock Kopf and on Kopf with kopf-outcomes installed (no policy, no plugin, a plain handler). The
deletion handler succeeds on a stale view of the deleting object after a change; the removal of
the finalizer is refused, and lands at a later event without the handler running again: both alike.
"""
from __future__ import annotations

import asyncio
from typing import Any

import kopf

import kopf_outcomes
from tests.histories import fake_api, kopf_access


def history(installed: bool) -> list[tuple[int, bool, bool]]:
    """After each step: the handler's runs so far, whether the finalizer is there, whether the object is."""
    if installed:
        kopf_outcomes.install(entry_points=False, events=False, plugins=[], policy=None)
    registry = kopf.OperatorRegistry()
    runs: list[Any] = []

    @kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, id="delete_fn")
    def delete_fn(spec: Any, **_: Any) -> None:
        runs.append(dict(spec))

    api = fake_api.FakeAPI()
    process = dict(registry=registry, settings=kopf_access.configuration.OperatorSettings(),
                   memories=kopf_access.inventory.ResourceMemories(), memobase=kopf_access.ephemera.Memo(),
                   indexers=kopf_access.indexing.OperatorIndexers())
    worker = kopf_access.worker_context(registry)
    loop = asyncio.new_event_loop()
    seen: list[tuple[int, bool, bool]] = []

    def cycle(event: fake_api.Event) -> None:
        loop.run_until_complete(worker.run(loop.create_task, kopf_access.processing.process_resource_event(
            lifecycle=kopf.lifecycles.all_at_once, resource=kopf_access.RESOURCE, raw_event=event.raw(),
            event_queue=asyncio.Queue(), no_throttling=True, stream_pressure=asyncio.Event(),
            consistency_time=None, **process)))
        seen.append((len(runs), api.finalized, api.body is not None))

    original = kopf_access.api.patch
    kopf_access.api.patch = api.patch
    try:
        api.create({"a": 0})
        while api.queue:
            cycle(api.queue.pop(0))  # the finalizer is added
        api.delete()
        api.user_patch({"spec": {"a": 1}})
        cycle(fake_api.Event("MODIFIED", api.versions[-2]))  # the deleting object as it was before the change
        while api.queue:
            cycle(api.queue.pop(0))
    finally:
        kopf_access.api.patch = original
        loop.close()
        kopf_outcomes.uninstall()
    assert runs == [{"a": 0}]
    return seen


def test_a_refused_release_lands_later_as_in_stock_kopf() -> None:
    stock = history(installed=False)
    if kopf_access.JSON_PATCHED_RELEASE:
        assert (1, True, True) in stock  # the stale view's release refused: the finalizer stays a while
    assert stock[-1] == (1, False, False)  # then released, the handler run once (on the stale view)
    assert history(installed=True) == stock
