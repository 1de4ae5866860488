"""Outcome Events as series (kopf_outcomes._kopf.event_series), with Kopf's API client faked: the
first Event of a reason on an object is created, repeats patch its count, one that is gone starts
a new series, and a failure to post is a warning that names the object. The real API server's
side is tests/e2e/test_event_series.py."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf
import pytest

from kopf_outcomes._kopf import event_series
from kopf_outcomes._kopf.internals import kopf_api_errors

REF = {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "name": "x", "uid": "series-u", "namespace": "ns"}
URL = "/api/v1/namespaces/ns/events"


class Gone(kopf_api_errors.APINotFoundError):
    def __init__(self) -> None:
        Exception.__init__(self, "not found")


class FakeApi:
    def __init__(self, *, fail: bool = False) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.fail = fail

    async def post(self, *, url: str, payload: dict[str, Any], **_: Any) -> dict[str, Any]:
        if self.fail:
            raise RuntimeError("the API server is away")
        self.calls.append(("post", url, payload["count"], payload["reason"], payload["message"]))
        return {"metadata": {"name": f"e{len(self.calls)}"}}

    async def patch(self, *, url: str, payload: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.calls.append(("patch", url, payload["count"], payload["message"]))
        if url == f"{URL}/e1" and payload["count"] == 3:
            raise Gone()
        return {}


async def post_all(messages: list[str]) -> None:
    settings = kopf.OperatorSettings()
    for message in messages:
        assert event_series.post(settings, REF, "Warning", "Retrying", message)
        await asyncio.gather(*event_series._tasks)


async def test_repeats_count_up_and_an_event_gone_starts_a_new_series(monkeypatch: pytest.MonkeyPatch) -> None:
    api = FakeApi()
    monkeypatch.setattr(event_series, "kopf_api", api)
    await post_all(["busy 1", "busy 2", "busy 3", "busy 4"])
    assert api.calls == [
        ("post", URL, 1, "Retrying", "busy 1"),
        ("patch", f"{URL}/e1", 2, "busy 2"),
        ("patch", f"{URL}/e1", 3, "busy 3"),  # gone: expired, or deleted by someone
        ("post", URL, 1, "Retrying", "busy 3"),
        ("patch", f"{URL}/e4", 2, "busy 4"),
    ]


async def test_a_failure_to_post_is_a_warning_naming_the_object(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(event_series, "kopf_api", FakeApi(fail=True))
    with caplog.at_level(logging.WARNING, logger="kopf_outcomes.events"):
        await post_all(["busy"])
    assert [r.getMessage() for r in caplog.records] == [
        "Failed to post an outcome Event (Warning Retrying on KopfExample ns/x): RuntimeError: the API server is away"]


def test_outside_an_event_loop_it_is_left_to_kopf() -> None:
    assert event_series.post(kopf.OperatorSettings(), REF, "Normal", "Pending", "waiting") is False
