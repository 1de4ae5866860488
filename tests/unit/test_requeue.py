"""The recheck schedule: a grid anchored where the conclusion began, computable without a write."""
from __future__ import annotations

import asyncio
import contextvars
import datetime
import json
import types
from typing import Any

import pytest

from kopf_outcomes import Pending
from kopf_outcomes._kopf import requeue
from kopf_outcomes.memory import MemoryRecord, parse

START = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
GRID = START + datetime.timedelta(seconds=requeue.phase(START.isoformat(), 60))  # its 60 s grid's anchor


def rechecking(every: float | None, since: datetime.datetime | None = START) -> MemoryRecord:
    record = MemoryRecord(digest="d", outcome="pending", reason="r")
    if since is not None:
        record["since"] = since.isoformat()
    if every is not None:
        record["recheck"] = every
    return record


@pytest.mark.parametrize(("elapsed", "due"), [
    (0.0, 60.0), (1.0, 60.0), (59.0, 60.0), (59.6, 60.0),  # within the tolerance: due now
    (60.6, 120.0), (119.0, 120.0), (1000.0, 1020.0),
])
def test_the_next_grid_point(elapsed: float, due: float) -> None:
    now = GRID + datetime.timedelta(seconds=elapsed)
    assert requeue.next_due(rechecking(60), now) == GRID + datetime.timedelta(seconds=due)


@pytest.mark.parametrize("record", [rechecking(None), rechecking(60, since=None), rechecking(0)])
def test_no_grid_without_an_interval_and_a_start(record: MemoryRecord) -> None:
    assert requeue.next_due(record, START) is None


def test_only_a_pending_record_rechecks() -> None:
    record = rechecking(60)
    assert requeue.recheck_of(record) == 60
    assert requeue.recheck_of(MemoryRecord(digest="d", outcome="retry", reason="r")) is None
    assert requeue.recheck_of(None) is None


def test_a_schedule_that_would_overflow_is_no_schedule() -> None:
    """A forged ``since`` must not raise out of Kopf's cycle (Kopf would never process the object again)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    forged = MemoryRecord(digest="d", outcome="pending", reason="r", since="9999-12-31T23:59:59+00:00", recheck=1.0)
    assert requeue.next_due(forged, now) is None
    ancient = MemoryRecord(digest="d", outcome="pending", reason="r", since="0001-01-01T00:00:00+00:00", recheck=1.0)
    due = requeue.next_due(ancient, now)
    assert due is not None and abs((due - now).total_seconds()) <= 1  # the grid point at hand


@pytest.mark.parametrize("recheck", [0, 0.5, -1, float("nan")])
def test_a_recheck_shorter_than_a_second_is_refused_where_it_is_made_and_read(recheck: float) -> None:
    with pytest.raises(ValueError, match=r"Pending\(recheck=...\) must be"):
        Pending("waiting", recheck=recheck)
    record = {"h": {"digest": "d", "outcome": "pending", "reason": "r", "since": START.isoformat(), "recheck": recheck}}
    with pytest.raises(ValueError, match="malformed"):
        parse(json.dumps(record))


async def test_a_requeued_event_reaches_only_the_change_handlers() -> None:
    """Kopf's indexers and @kopf.on.event handlers never see the event we queue again; the
    cycles of the object know the operator's registry."""
    import functools

    import kopf

    import tests.unit.kopf_objects
    from kopf_outcomes._kopf.internals import operator_registry
    from tests.unit.kopf_objects import handler_of

    registry = kopf.OperatorRegistry()
    registry._watching.append(handler_of("event", lambda **_: None))
    registry._indexing.append(handler_of("index", lambda **_: None))
    seen: list[tuple[bool, bool, object]] = []

    async def process_resource_event(*, registry: kopf.OperatorRegistry, raw_event: Any) -> None:
        resource = tests.unit.kopf_objects.RESOURCE
        seen.append((registry._watching.has_handlers(resource=resource), registry._indexing.has_handlers(
            resource=resource), operator_registry.get()))

    async def kopf_worker(*, processor: Any, streams: Any, key: str) -> None:
        await processor(raw_event={"type": "MODIFIED", "object": {}})
        await processor(raw_event=requeue.Requeued({"type": "MODIFIED", "object": {}}))

    stream = types.SimpleNamespace(backlog=asyncio.Queue())
    worker = requeue.wrap_worker(kopf_worker, lambda resource, body: None)
    await worker(processor=functools.partial(process_resource_event, registry=registry),
                 streams={"k": stream}, key="k")
    assert seen == [(True, True, registry), (False, False, registry)]
    assert len(registry._watching.get_all_handlers()) == 1  # the operator's own registry is untouched


@pytest.mark.parametrize(("selected", "still", "processed", "gone"), [
    (False, False, ["MODIFIED", "MODIFIED"], 0),  # nothing selected on the server: nothing asked
    (True, True, ["MODIFIED", "MODIFIED"], 0),
    (True, False, ["MODIFIED"], 1),  # it left the watch unseen: the recheck is dropped, told as gone
])
async def test_a_recheck_of_a_resource_selected_on_the_server_runs_only_while_the_object_is_in_the_selection(
        selected: bool, still: bool, processed: list[str], gone: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import functools

    import kopf

    import tests.unit.kopf_objects
    from kopf_outcomes._kopf import selection

    settings, asked, seen, told = kopf.OperatorSettings(), [], [], []
    if selected and hasattr(settings.watching, "label_selectors"):
        settings.watching.label_selectors[tests.unit.kopf_objects.RESOURCE.plural] = "shard=a"
    elif selected:
        pytest.skip("Kopf < 1.45 selects nothing on the server")

    async def still_selected(*args: Any) -> bool:  # the API server's answer (tests/e2e/test_still_selected.py)
        asked.append(args[2])
        return still
    monkeypatch.setattr(selection, "still_selected", still_selected)

    async def process_resource_event(*, raw_event: Any, **_: Any) -> None:
        seen.append(raw_event["type"])

    async def kopf_worker(*, processor: Any, streams: Any, key: str) -> None:
        await processor(raw_event={"type": "MODIFIED", "object": {}})
        await processor(raw_event=requeue.Requeued({"type": "MODIFIED", "object": {}}))

    worker = requeue.wrap_worker(kopf_worker, lambda resource, body: told.append(body))
    await worker(processor=functools.partial(process_resource_event, settings=settings, registry=None,
                                             resource=tests.unit.kopf_objects.RESOURCE),
                 streams={"k": types.SimpleNamespace(backlog=asyncio.Queue())}, key="k")
    assert seen == processed and len(told) == gone
    assert asked == ([selection.Selection("shard=a", "", "")] if selected else [])


@pytest.mark.parametrize(("elapsed", "quiet"), [(0, 0), (59, 0), (60, 0), (119.6, 1), (125, 1), (300, 4)])
def test_quiet_rechecks_are_counted_from_the_grid(elapsed: float, quiet: int) -> None:
    """Kopf stored retries=1 with the conclusion; the k-th recheck is attempt k+1: k-1 quiet ones."""
    assert requeue.quiet_attempts(rechecking(60), GRID + datetime.timedelta(seconds=elapsed)) == quiet
    assert requeue.quiet_attempts(MemoryRecord(digest="d", outcome="retry", reason="r"), START) == 0
def listing(event: dict[str, object]) -> contextvars.Context:
    """A context in which the cycle processes ``event`` (as the patched worker sets it)."""
    context = contextvars.copy_context()
    context.run(requeue._stream.set, requeue.Stream(asyncio.Queue(), event))
    return context


LISTED = {"type": None, "object": {}}


@pytest.mark.parametrize(("event", "elapsed", "due"), [
    (LISTED, 60.3, 120.0),  # a restart/resume/takeover just after a point: the replica active then ran it
    (LISTED, 59.7, 60.0),  # just before one: due now, as always
    (LISTED, 0.2, 60.0),
    (requeue.Requeued(LISTED), 60.3, 60.0),  # this replica's own wake-up, a little late: due now
    ({"type": "MODIFIED", "object": {}}, 60.3, 60.0),  # a watch event: as before
])
def test_a_point_just_passed_is_not_due_again_for_a_fresh_listing(event: dict[str, object], elapsed: float,
                                                                   due: float) -> None:
    now = GRID + datetime.timedelta(seconds=elapsed)
    found = listing(event).run(requeue.next_due, rechecking(60), now)
    assert found == GRID + datetime.timedelta(seconds=due)


@pytest.mark.parametrize(("elapsed", "due"), [(60.003, 120.0), (60.4, 120.0), (119.9, 120.0), (0.0, 60.0)])
def test_after_a_run_the_next_recheck_is_the_next_grid_point(elapsed: float, due: float) -> None:
    """Not a full interval from the run: that drifted by each cycle's own time (Kopf 1.37: 0.1 s a run)."""
    now = GRID + datetime.timedelta(seconds=elapsed)
    assert requeue.next_due(rechecking(60), now, after=True) == GRID + datetime.timedelta(seconds=due)


@pytest.mark.parametrize(("ran", "due"), [(59.7, 120.0), (60.3, 120.0), (90.0, 120.0), (119.6, 180.0)])
def test_a_run_within_the_tolerance_before_a_point_served_that_point(ran: float, due: float) -> None:
    """A run 0.3 s early served the point at 60 s: the next one is at 120 s, not 60 s again (a
    double run, seen under load in the scale-out chaos scenario)."""
    at = GRID + datetime.timedelta(seconds=ran)
    assert requeue.next_due(rechecking(60), at, after=True, served=True) == GRID + datetime.timedelta(seconds=due)


def test_conclusions_made_in_the_same_second_recheck_apart_and_stay_apart() -> None:
    """Issue 42 (cost): a grid anchored at each conclusion's time kept objects that concluded in
    the same second in lock-step for good (a burst of runs each interval); each grid now has a
    phase of its own, fixed by its stored start: the same after a restart."""
    since = [START + datetime.timedelta(microseconds=7919 * n) for n in range(100)]  # all within 1 s
    later = START + datetime.timedelta(seconds=3600)
    due = [requeue.next_due(rechecking(60, at), later) for at in since]
    offsets = sorted((point - later).total_seconds() for point in due if point is not None)
    assert len(offsets) == 100
    assert offsets[-1] - offsets[0] > 4.0  # spread over most of a tenth of the interval; was: within 1 s
    assert all(0.0 <= requeue.phase(at.isoformat(), 60) < 6.0 for at in since)  # never more than a tenth late
    assert due == [requeue.next_due(rechecking(60, at), later) for at in since]  # a restart finds the same grid


async def test_a_recheck_under_server_selection_asks_no_request_and_drops_an_object_that_left_unseen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 42 (cost): a quiet recheck of a resource that the API server selects asked a LIST of its
    own (one per object per recheck). Whether the object is still selected is read off the watch
    stream: a new listing (after "410 Gone") that lacks it says it left, with no request."""
    import functools

    import kopf
    from kopf._cogs.clients import api, watching

    import kopf_outcomes
    import tests.unit.kopf_objects

    def obj(name: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"}}
    settings, requests, processed, told = kopf.OperatorSettings(), [], [], []
    if not hasattr(settings.watching, "label_selectors"):
        pytest.skip("Kopf < 1.45 selects nothing on the server")
    settings.watching.label_selectors[tests.unit.kopf_objects.RESOURCE.plural] = "shard=a"

    async def get(**kwargs: Any) -> dict[str, Any]:  # the API server (tests/e2e/test_still_selected.py)
        requests.append(kwargs["url"])
        return {"items": [{}]}
    monkeypatch.setattr(api, "get", get)

    listings = iter(([obj("a"), obj("b")], [obj("a")]))

    async def kopf_connection(**_: Any) -> Any:  # two listings, the second after a "410 Gone": b left meanwhile
        for body in next(listings):
            yield {"type": None, "object": body}
        yield watching.Bookmark.LISTED
    monkeypatch.setattr(watching, "continuous_watch", kopf_connection)
    settings.watching.reconnect_backoff = 0
    kopf_outcomes.install(entry_points=False, events=False)

    async def process_resource_event(*, raw_event: Any, **_: Any) -> None:
        processed.append(raw_event["object"]["metadata"]["name"])

    async def recheck(name: str) -> None:
        async def kopf_worker(*, processor: Any, streams: Any, key: str) -> None:
            await processor(raw_event=requeue.Requeued({"type": "MODIFIED", "object": obj(name)}))
        worker = requeue.wrap_worker(kopf_worker, lambda resource, body: told.append(body["metadata"]["name"]))
        await worker(processor=functools.partial(process_resource_event, settings=settings, registry=None,
                                                 resource=tests.unit.kopf_objects.RESOURCE),
                     streams={"k": types.SimpleNamespace(backlog=asyncio.Queue())}, key="k")

    async def kopf_watcher(**_: Any) -> None:  # Kopf's watcher: its stream, its workers' rechecks
        stream = watching.infinite_watch(settings=settings, resource=tests.unit.kopf_objects.RESOURCE,
                                         namespace=None, _iterations=2)
        async for event in stream:
            if event is watching.Bookmark.LISTED:
                await recheck("a")
                await recheck("b")

    try:
        await requeue.wrap_watcher(kopf_watcher)(settings=settings, resource=tests.unit.kopf_objects.RESOURCE,
                                                 operator_paused=None)
    finally:
        kopf_outcomes.uninstall()
    assert processed == ["a", "b", "a"] and told == ["b"]  # b left the selection unseen: not rechecked
    assert requests == []  # was: one LIST per recheck
