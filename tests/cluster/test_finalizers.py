"""Against the real API server: a finalizer holds an object through DELETE until removed."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes_asyncio.client import CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.watch import Watch

from kopf_outcomes_testing.cluster.resources import GROUP, PLURAL, VERSION

FINALIZER = "kopf-outcomes.test/hold"
MERGE_PATCH = "application/merge-patch+json"


async def next_event(events: asyncio.Queue[tuple[str, Any]], kind: str) -> Any:
    """The object of the next watch event of that type (others are skipped)."""
    while True:
        etype, obj = await asyncio.wait_for(events.get(), timeout=10)
        if etype == kind:
            return obj


async def test_finalizer_holds_deletion_until_removed(k8s_api: Any, k8s_namespace: str) -> None:
    api = CustomObjectsApi(k8s_api)
    args = (GROUP, VERSION, k8s_namespace, PLURAL)
    created = await api.create_namespaced_custom_object(*args, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "KopfExample",
        "metadata": {"name": "held", "finalizers": [FINALIZER]},
        "spec": {"field": "value"}})

    events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    async def watch() -> None:
        async with Watch() as w:
            async for event in w.stream(api.list_namespaced_custom_object, *args,
                                        resource_version=created["metadata"]["resourceVersion"],
                                        timeout_seconds=30):
                await events.put((event["type"], event["object"]))

    watcher = asyncio.create_task(watch())
    try:
        await api.delete_namespaced_custom_object(*args, "held")

        marked = await next_event(events, "MODIFIED")
        assert marked["metadata"]["deletionTimestamp"]
        still_there = await api.get_namespaced_custom_object(*args, "held")
        assert still_there["metadata"]["deletionTimestamp"]
        assert still_there["metadata"]["finalizers"] == [FINALIZER]

        await api.patch_namespaced_custom_object(*args, "held", {"metadata": {"finalizers": None}},
                                                 _content_type=MERGE_PATCH)
        gone = await next_event(events, "DELETED")
        assert gone["metadata"]["name"] == "held"
        with pytest.raises(ApiException) as missing:
            await api.get_namespaced_custom_object(*args, "held")
        assert missing.value.status == 404
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
