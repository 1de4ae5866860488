"""Outcome Events as series (kopf_outcomes._kopf.event_series), with Kopf's API client faked: the
first Event of a reason on an object is created, repeats patch its count, one that is gone starts
a new series, and a failure to post is a warning that names the object. The real API server's
side is tests/e2e/test_event_series.py."""
from __future__ import annotations

import asyncio
import collections
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
    def __init__(self, *, fail: bool = False, expires: bool = True) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.fail = fail
        self.expires = expires  # the first Event is gone at its third count

    async def post(self, *, url: str, payload: dict[str, Any], **_: Any) -> dict[str, Any]:
        if self.fail:
            raise RuntimeError("the API server is away")
        self.calls.append(("post", url, payload["count"], payload["reason"], payload["message"]))
        return {"metadata": {"name": f"e{len(self.calls)}"}}

    async def patch(self, *, url: str, payload: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.calls.append(("patch", url, payload["count"], payload["message"]))
        if self.expires and url == f"{URL}/e1" and payload["count"] == 3:
            raise Gone()
        return {}


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """No series from another test; a clock the test moves (seconds)."""
    monkeypatch.setattr(event_series, "_series", type(event_series._series)())
    monkeypatch.setattr(event_series, "_similar", collections.OrderedDict(), raising=False)
    now = [1000.0]
    monkeypatch.setattr(event_series, "clock", lambda: now[0], raising=False)
    return now


async def post_all(messages: list[str]) -> None:
    settings = kopf.OperatorSettings()
    for message in messages:
        assert event_series.post(settings, REF, "Warning", "Retrying", message)
        await asyncio.gather(*event_series._tasks)


async def test_repeats_count_up_and_an_event_gone_starts_a_new_series(monkeypatch: pytest.MonkeyPatch) -> None:
    api = FakeApi()
    monkeypatch.setattr(event_series, "kopf_api", api)
    await post_all(["busy"] * 4)
    assert api.calls == [
        ("post", URL, 1, "Retrying", "busy"),
        ("patch", f"{URL}/e1", 2, "busy"),
        ("patch", f"{URL}/e1", 3, "busy"),  # gone: expired, or deleted by someone
        ("post", URL, 1, "Retrying", "busy"),
        ("patch", f"{URL}/e4", 2, "busy"),
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


async def test_another_message_is_an_event_of_its_own_not_a_repeat(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 44, finding 8: keyed by (object, type, reason), four "connection refused" and then one
    "403 forbidden" became one Event ``count: 5, "403 forbidden"``; client-go keys repeats by message."""
    api = FakeApi(expires=False)
    monkeypatch.setattr(event_series, "kopf_api", api)
    await post_all(["connection refused"] * 4 + ["403 forbidden"])
    assert api.calls == [
        ("post", URL, 1, "Retrying", "connection refused"),
        ("patch", f"{URL}/e1", 2, "connection refused"),
        ("patch", f"{URL}/e1", 3, "connection refused"),
        ("patch", f"{URL}/e1", 4, "connection refused"),
        ("post", URL, 1, "Retrying", "403 forbidden"),
    ]


async def test_similar_events_are_combined_from_the_tenth_message_within_ten_minutes(
        monkeypatch: pytest.MonkeyPatch, fresh: list[float]) -> None:
    """client-go's EventAggregate: the 10th distinct message of one object, type and reason within
    10 minutes of the previous one starts one combined Event, marked so; later ones count in it."""
    api = FakeApi(expires=False)
    monkeypatch.setattr(event_series, "kopf_api", api)
    for n in range(1, 12):
        fresh[0] += 59  # within 10 minutes of the previous similar Event, not of the first
        await post_all([f"attempt {n} failed"])
    assert api.calls[:9] == [("post", URL, 1, "Retrying", f"attempt {n} failed") for n in range(1, 10)]
    assert api.calls[9:] == [
        ("post", URL, 1, "Retrying", "(combined from similar events): attempt 10 failed"),
        ("patch", f"{URL}/e10", 2, "(combined from similar events): attempt 11 failed"),
    ]


async def test_similar_events_more_than_ten_minutes_apart_are_never_combined(
        monkeypatch: pytest.MonkeyPatch, fresh: list[float]) -> None:
    api = FakeApi()
    monkeypatch.setattr(event_series, "kopf_api", api)
    for n in range(1, 13):
        fresh[0] += 601
        await post_all([f"attempt {n} failed"])
    assert api.calls == [("post", URL, 1, "Retrying", f"attempt {n} failed") for n in range(1, 13)]
