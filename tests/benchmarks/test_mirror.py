"""The benchmarks' watch-fed mirror resumes after failures: a fake watch, no API server."""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, watch

from benchmarks.mirror import Mirror
from benchmarks.retries import Retries


def obj(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": version}}


class FakeApi:
    """What the mirror needs of the client: the listing it starts from, and a retry counter."""

    def __init__(self, *listings: list[dict[str, Any]]) -> None:
        self.listings = list(listings)
        self.retries = Retries()


class FakeObjects:
    def __init__(self, api: FakeApi) -> None:
        self.api = api

    async def list_namespaced_custom_object(self, *_: Any) -> dict[str, Any]:
        items = self.api.listings.pop(0)
        version = max((int(i["metadata"]["resourceVersion"]) for i in items), default=1)
        return {"items": items, "metadata": {"resourceVersion": str(version)}}


class FakeWatch:
    """Each stream plays the next script: events, then an error (or stays open)."""

    scripts: list[tuple[list[dict[str, Any]], BaseException | None]] = []
    resumed_from: list[str] = []

    async def close(self) -> None:
        pass

    async def stream(self, *_: Any, resource_version: str, **__: Any) -> AsyncIterator[dict[str, Any]]:
        FakeWatch.resumed_from.append(resource_version)
        events, error = FakeWatch.scripts.pop(0) if FakeWatch.scripts else ([], None)
        for event in events:
            yield event
        if error is not None:
            raise error
        await asyncio.Event().wait()  # an open, quiet stream


@pytest.fixture(autouse=True)
def fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "CustomObjectsApi", FakeObjects)  # restored after each test
    monkeypatch.setattr(watch, "Watch", FakeWatch)
    FakeWatch.scripts = []
    FakeWatch.resumed_from = []


async def test_a_dropped_watch_resumes_from_the_last_version_and_is_counted() -> None:
    api = FakeApi([obj("a", "1")])
    FakeWatch.scripts = [([{"type": "ADDED", "raw_object": obj("b", "5")}], aiohttp.ServerDisconnectedError()),
                         ([{"type": "DELETED", "raw_object": obj("a", "7")}], None)]
    async with Mirror(api, "ns") as mirror:  # type: ignore[arg-type]
        await mirror.wait(lambda: "a" in mirror.gone, timeout=10, what="a gone")
        assert set(mirror.bodies) == {"b"}
    assert FakeWatch.resumed_from == ["1", "5"]
    assert api.retries.report()["by_cause"] == {"connection": 1}


async def test_an_expired_version_lists_again_and_marks_what_vanished_as_gone() -> None:
    api = FakeApi([obj("a", "1"), obj("b", "2")], [obj("b", "9")])
    FakeWatch.scripts = [([], client.ApiException(status=410, reason="Expired"))]
    async with Mirror(api, "ns") as mirror:  # type: ignore[arg-type]
        await mirror.wait(lambda: "a" in mirror.gone, timeout=10, what="a gone after the re-list")
        assert set(mirror.bodies) == {"b"} and mirror.version == "9"
    assert FakeWatch.resumed_from[:2] == ["2", "9"]


async def test_a_failure_that_is_not_retryable_ends_the_waits_with_it() -> None:
    api = FakeApi([])
    FakeWatch.scripts = [([], client.ApiException(status=403, reason="Forbidden"))]
    async with Mirror(api, "ns") as mirror:  # type: ignore[arg-type]
        with pytest.raises(RuntimeError, match=r"(?s)the watch of ns failed: ApiException: \(403\)"):
            await mirror.wait(lambda: False, timeout=10, what="never")
    assert api.retries.report()["total"] == 0
