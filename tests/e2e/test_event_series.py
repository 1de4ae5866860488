"""
Outcome Events on the real API server: repeats of one reason on one object are one Event whose
``count`` grows (as client-go's recorder makes them), where stock Kopf posts an Event per attempt;
Kopf's ``settings.posting.level`` is honoured. (A Retry every second for a few seconds here; the
figures for every 5 s over 5 minutes are in the changelog.)
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kubernetes_asyncio import client

from tests.e2e.conftest import eventually
from tests.e2e.test_outcomes import runs, start_deleting

OPERATOR = "tests/e2e/operators/events_operator.py"


async def delete_fn_events(api: client.ApiClient, namespace: str, name: str) -> list[client.CoreV1Event]:
    listing = await client.CoreV1Api(api).list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
    return [event for event in listing.items if "delete_fn" in (event.message or "")]


async def test_retries_are_one_event_whose_count_grows_where_stock_posts_one_per_attempt(
        api, objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "ours", {"delay": 1})
        await eventually(lambda: _runs_at_least(op, 5), timeout=30, what="five runs")
        attempts = runs(op)
        ours = await eventually(lambda: _posted(api, namespace, "ours", lambda events: len(events) == 1
                                                and events[0].count >= attempts), what="the count of the attempts")
    [event] = ours
    assert (event.type, event.reason) == ("Warning", "Retrying")
    assert event.message == "Handler 'delete_fn' failed temporarily: the external system is busy"
    assert event.last_timestamp > event.first_timestamp

    async with operator(OPERATOR, INSTALL_KOPF_OUTCOMES="0") as op:
        await start_deleting(objects, namespace, "stock", {"delay": 1})
        await eventually(lambda: _runs_at_least(op, 5), timeout=30, what="five runs")
        attempts = runs(op)
        stock = await eventually(lambda: _posted(api, namespace, "stock", lambda events: len(events) >= attempts),
                                 what="an Event per attempt")
    assert {(event.type, event.reason, event.message, event.count) for event in stock} == {
        ("Error", "Logging", "Handler 'delete_fn' failed temporarily: the external system is busy", None)}


async def _posted(api: client.ApiClient, namespace: str, name: str,
                  enough: Callable[[list[client.CoreV1Event]], bool]) -> list[client.CoreV1Event] | None:
    events = await delete_fn_events(api, namespace, name)
    return events if enough(events) else None


async def test_outcome_events_below_kopfs_posting_level_are_not_posted(api, objects, namespace, operator):
    async with operator(OPERATOR, POSTING_LEVEL=str(logging.ERROR)) as op:
        await start_deleting(objects, namespace, "quiet", {"delay": 1})
        await eventually(lambda: _runs_at_least(op, 3), timeout=30, what="three runs")
        await asyncio.sleep(1)
        assert await delete_fn_events(api, namespace, "quiet") == []


async def _runs_at_least(op, count: int) -> bool:
    return runs(op) >= count
