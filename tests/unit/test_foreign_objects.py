"""A declared shard's events of another shard's objects, through Kopf's own event processing: the
shards share the finalizer, so Kopf queues its removal on each of them; refused (:mod:`.held`), it
must cost no copy and diff of the body (issue 31: 40 % of such an event's CPU) and no request."""
from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import kopf
import pytest
from kopf._cogs.clients import api
from kopf._cogs.configs import configuration
from kopf._cogs.structs import ephemera, patches, references
from kopf._core.reactor import inventory, processing

import kopf_outcomes
from kopf_outcomes import shards

LABEL = "example.com/shard"
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
RESOURCE = references.Resource("kopf.dev", "v1", "kopfexamples", namespaced=True)


@pytest.fixture
def diffs(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Each whole-body diff Kopf makes to build a JSON patch (``Patch.as_json_patch``, Kopf >= 1.38)."""
    jsonpatch = pytest.importorskip("jsonpatch", reason="Kopf < 1.38 sends merge-patches: it makes no diff to count")
    made: list[object] = []
    original = jsonpatch.JsonPatch.from_diff

    def from_diff(*args: Any, **kwargs: Any) -> Any:
        made.append(args)
        return original(*args, **kwargs)
    monkeypatch.setattr(jsonpatch.JsonPatch, "from_diff", from_diff)
    return made


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Kopf's PATCH requests, answered with the object as patched (no cluster in unit tests)."""
    requests: list[object] = []

    async def patch(*, payload: Any, **_: Any) -> dict[str, Any]:
        requests.append(payload)
        return {"metadata": {"resourceVersion": "2"}}
    monkeypatch.setattr(api, "patch", patch)
    return requests


@pytest.fixture
def patched() -> Iterator[None]:
    kopf_outcomes.install(entry_points=False, events=False)
    yield
    kopf_outcomes.uninstall()
    shards.declared = None


def _registry(serves: str = "a") -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, labels={LABEL: serves})(lambda **_: None)
    return registry


def _event(shard: str, *, deleting: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "x", "namespace": "ns", "uid": "u1", "resourceVersion": "1",
                            "labels": {LABEL: shard}, "finalizers": [FINALIZER]}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-04T00:00:00Z"
    return {"type": "MODIFIED", "object": {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": meta}}


async def _process(registry: kopf.OperatorRegistry, event: dict[str, Any]) -> None:
    await processing.process_resource_event(
        lifecycle=kopf.lifecycles.all_at_once, indexers=processing.indexing.OperatorIndexers(),
        registry=registry, settings=configuration.OperatorSettings(), memories=inventory.ResourceMemories(),
        memobase=ephemera.Memo(), resource=RESOURCE, raw_event=event,  # type: ignore[arg-type]
        event_queue=asyncio.Queue(), no_throttling=True)


@pytest.mark.parametrize("deleting", [False, True])
async def test_another_shards_object_costs_no_diff_and_no_request(
        patched: None, diffs: list[object], sent: list[object], deleting: bool) -> None:
    kopf_outcomes.shard(LABEL, "a")
    await _process(_registry(), _event("b", deleting=deleting))
    assert diffs == [] and sent == []


async def test_its_own_objects_are_released_as_before(patched: None, diffs: list[object], sent: list[object]) -> None:
    kopf_outcomes.shard(LABEL, "a")
    await _process(_registry(serves="b"), _event("a", deleting=False))  # no handler matches: Kopf removes it
    assert len(diffs) == 1 and sent == [[{"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
                                        {"op": "remove", "path": "/metadata/finalizers"}]]


async def test_without_a_shard_kopf_diffs_and_removes_as_stock(patched: None, diffs: list[object],
                                                              sent: list[object]) -> None:
    await _process(_registry(), _event("b", deleting=False))
    assert len(diffs) == 1 and len(sent) == 1  # issue 664: stock Kopf's removal, as without us


def test_kopf_gets_its_own_function_back() -> None:
    original = patches.Patch.as_json_patch
    kopf_outcomes.install(entry_points=False, events=False)
    try:
        assert patches.Patch.as_json_patch is not original
    finally:
        kopf_outcomes.uninstall()
    assert patches.Patch.as_json_patch is original
