"""Adversarial review of the wake-ups change (issue 43 findings 1, 2, 5; issue 42's recheck cost):
each suspicion driven through Kopf's real code (its ``infinite_watch`` / ``continuous_watch`` over
a scripted API, its ``process_resource_event``). A strict xfail is a promise the change breaks."""
from __future__ import annotations

import asyncio
import datetime
import functools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import kopf
import pytest
from kopf._cogs.clients import fetching, watching

from kopf_outcomes import objects
from kopf_outcomes._kopf import requeue, selection
from tests.unit.kopf_objects import configuration, processing, references
from tests.unit.test_wakeup_timing import (
    child_event,
    operator,
    parent_body,
    patched,
    worker_and_processor,
    worker_of,
)

__all__ = ["patched"]  # the fixture, shared with test_wakeup_timing

RESOURCE = references.Resource("kopf.dev", "v1", "kopfexamples", namespaced=True)


def body(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "resourceVersion": "1"}}


class ScriptedApi:
    """The API server as Kopf's watch sees it: one script per connection of ``continuous_watch``.
    A listing is a list of bodies, optionally cut by a connection error after them (``cut``); its
    watch then ends with "410 Gone", which sends Kopf back to a new listing."""

    def __init__(self, listings: list[tuple[list[dict[str, Any]], bool]]) -> None:
        self.listings = listings
        self.connection = 0

    async def fetch_objs(self, **_: Any) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
        items, cut = self.listings[self.connection]
        self.connection += 1
        yield items, "100"
        if cut:
            raise aiohttp.ClientConnectionError("the listing's connection dropped midway")

    async def list_objs(self, **_: Any) -> tuple[list[dict[str, Any]], str]:
        """Kopf 1.37's listing, all at once (before fetch_objs): a cut one yields nothing."""
        items, cut = self.listings[self.connection]
        self.connection += 1
        if cut:
            raise aiohttp.ClientConnectionError("the listing's connection dropped")
        return items, "100"

    async def watch_objs(self, **_: Any) -> AsyncIterator[dict[str, Any]]:
        yield {"type": "ERROR", "object": {"code": 410}}

    def serve(self, monkeypatch: pytest.MonkeyPatch) -> configuration.OperatorSettings:
        """Kopf's listing and watching answered by this script; the settings to watch with."""
        if hasattr(fetching, "fetch_objs"):
            monkeypatch.setattr(fetching, "fetch_objs", self.fetch_objs)
        else:
            monkeypatch.setattr(fetching, "list_objs", self.list_objs)
        monkeypatch.setattr(watching, "watch_objs", self.watch_objs)
        settings = configuration.OperatorSettings()
        settings.watching.reconnect_backoff = 0
        return settings


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> Iterator[selection.Listings]:
    found = selection.Listings()
    token = requeue._listings.set(found)  # as wrap_watcher sets it for a server-selected resource
    yield found
    requeue._listings.reset(token)


def watch(api: ScriptedApi, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    """Kopf's own ``infinite_watch``, its connections (``continuous_watch``) as the patch wraps them,
    over the scripted API."""
    settings = api.serve(monkeypatch)
    monkeypatch.setattr(watching, "continuous_watch", requeue.wrap_watch(watching.continuous_watch))
    return watching.infinite_watch(settings=settings, resource=RESOURCE, namespace=None, _iterations=len(api.listings))


# Server-side selection, the only place the watch stream is read, comes with Kopf 1.45; the stream's
# listing function these stand in for (fetching.fetch_objs) is not in Kopf 1.37.
SELECTING_KOPF = pytest.mark.skipif(not hasattr(fetching, "fetch_objs"), reason=(
    "this Kopf has no fetching.fetch_objs to stand in for, nor server-side selection (Kopf 1.45)"))



async def test_a_relist_drops_what_left_while_down_and_keeps_what_is_listed_also_midway(
        listings: selection.Listings, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guard: x left the selection while the watch was down (it is not in the relist) and is read
    as left once that listing completes, not before; y, listed again, is never read as left."""
    api = ScriptedApi([([body("x"), body("y")], False), ([body("y")], False)])
    seen_midway: list[tuple[bool, bool]] = []
    async for raw_event in watch(api, monkeypatch):
        if isinstance(raw_event, dict) and api.connection == 2 and raw_event.get("type") is None:
            seen_midway.append((listings.holds(body("x")), listings.holds(body("y"))))
    assert seen_midway == [(True, True)]  # within the relist: nothing dropped yet
    assert not listings.holds(body("x"))
    assert listings.holds(body("y"))


async def test_an_object_in_a_listing_cut_midway_that_left_before_the_next_is_read_as_left(
        listings: selection.Listings, monkeypatch: pytest.MonkeyPatch) -> None:
    """x is selected; the watch gets "410 Gone"; the relist's connection drops after its first chunk
    (which still held x: Kopf yields it, then returns without LISTED); x then leaves the selection
    (another shard's now); the next listing, complete, does not hold x. x left: it must not read as
    still selected (its recheck would run here on its last state while the other shard serves it).
    (Was: the stream of every connection read as one, x stamped as of the next complete listing.)"""
    api = ScriptedApi([([body("x")], False), ([body("x")], True), ([], False)])
    async for _ in watch(api, monkeypatch):
        pass
    assert not listings.holds(body("x"))
    assert listings.listed == 3  # the last complete listing: the third (the second was cut)


async def test_an_indexer_that_raises_does_not_lose_the_wakeup(
        patched: None) -> None:
    """Guard: another index of the child's resource raises on this child (Kopf logs and ignores
    it); the parents it left and joined are still woken."""
    async def child_fn(**_: Any) -> Any:
        return None

    registry, source = operator(child_fn)

    @kopf.index("kopf.dev", "v1", "kopfexamples", registry=registry)
    def broken_index(**_: Any) -> Any:
        raise ValueError("a user's indexer fails on this child")

    process = worker_of(registry)
    await process(child_event("c1", "a", kind=None))
    woken = {name: asyncio.Event() for name in "ab"}
    forgets = [objects.wait(source.wake_keys(parent_body(name)), event) for name, event in woken.items()]
    try:
        await process(child_event("c1", "b"))
        assert woken["a"].is_set() and woken["b"].is_set()
    finally:
        for forget in forgets:
            forget()
        await process(child_event("c1", "b", kind="DELETED"))
    assert "u-c1" not in objects._last_keys


def test_a_phased_recheck_comes_no_earlier_than_asked_and_at_most_a_tenth_later() -> None:
    """Guard: the grid's phase moves a recheck later, never earlier than ``recheck`` after the
    conclusion, and never more than 1.1 times it (docs/outcomes.md: up to a tenth)."""
    start = datetime.datetime(2026, 12, 6, 2, 0, 0, 123456, tzinfo=datetime.timezone.utc)
    for micro in range(0, 1_000_000, 9973):
        since = start.replace(microsecond=micro)
        record: Any = {"outcome": "pending", "recheck": 60.0, "since": since.isoformat()}
        due = requeue.next_due(record, since)
        assert due is not None
        assert 60.0 <= (due - since).total_seconds() <= 66.0


async def test_a_child_deleted_and_recreated_under_its_name_wakes_both_parents_and_is_remembered_once(
        patched: None) -> None:
    """Guard: c1 of a is deleted (Kopf sees it go) and created again under its name, a new uid, for
    b: a wakes when it goes, b when it comes; only the new uid is remembered."""
    async def child_fn(**_: Any) -> Any:
        return None

    registry, source = operator(child_fn)
    process = worker_of(registry)
    await process(child_event("c1", "a", kind=None))
    woken = {name: asyncio.Event() for name in "ab"}
    forgets = [objects.wait(source.wake_keys(parent_body(name)), event) for name, event in woken.items()]
    reborn = child_event("c1", "b", kind="ADDED")
    reborn["object"]["metadata"]["uid"] = "u-c1-again"
    try:
        await process(child_event("c1", "a", kind="DELETED"))
        assert woken["a"].is_set() and not woken["b"].is_set()
        await process(reborn)
        assert woken["b"].is_set()
        assert "u-c1" not in objects._last_keys and "u-c1-again" in objects._last_keys
    finally:
        for forget in forgets:
            forget()
        await process({**reborn, "type": "DELETED"})
    assert "u-c1-again" not in objects._last_keys


async def test_a_child_gone_while_the_watch_was_down_is_forgotten_and_its_parent_woken(
        patched: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """c1 of a is listed; the watch goes down ("410 Gone"); c1 is deleted meanwhile; Kopf's relist
    does not hold it and emits no DELETED for it. Its entry of which parents it belonged to goes
    with that complete relisting (was: kept for good, one more for every such child: unbounded,
    where the LRU it replaced was bounded), and a is woken: c1 left it. c2, listed again, stays."""
    async def child_fn(**_: Any) -> Any:
        return None

    registry, source = operator(child_fn)
    process = worker_of(registry)
    c1, c2 = (child_event(name, "a", kind=None)["object"] for name in ("c1", "c2"))
    api = ScriptedApi([([c1, c2], False), ([c2], False)])
    settings = api.serve(monkeypatch)
    woken = asyncio.Event()
    forget = objects.wait(source.wake_keys(parent_body("a")), woken)
    remembered: list[bool] = []

    async def kopf_watcher(**_: Any) -> None:  # Kopf's watcher: its stream, each object's event to its worker
        async for raw_event in watching.infinite_watch(settings=settings, resource=RESOURCE, namespace=None,
                                                       _iterations=2):
            if isinstance(raw_event, dict):
                await process(raw_event)
            elif api.connection == 1:  # the first listing is complete
                remembered.append("u-c1" in objects._last_keys)
                woken.clear()
    try:
        await requeue.wrap_watcher(kopf_watcher)(
            settings=settings, resource=RESOURCE, operator_paused=None,
            processor=functools.partial(processing.process_resource_event, registry=registry))
        assert remembered == [True]
        assert "u-c1" not in objects._last_keys and "u-c2" in objects._last_keys
        assert woken.is_set()
    finally:
        forget()
        for body in (c1, c2):
            await process({"type": "DELETED", "object": body})


async def test_a_child_gone_while_the_watch_was_down_leaves_the_index_its_parent_reads(
        patched: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """As above, but what the woken parent then reads: Kopf keeps an object that went while the watch
    was down in its indices until a restart (its relist emits no DELETED), so the parent, woken,
    still found c1 and waited for it for good (stranded). The complete relisting takes c1 out of the
    index the parent reads; c2, listed again, stays in it."""
    async def child_fn(**_: Any) -> Any:
        return None

    registry, source = operator(child_fn)
    process, processor = worker_and_processor(registry)
    c1, c2 = (child_event(name, "a", kind=None)["object"] for name in ("c1", "c2"))
    api = ScriptedApi([([c1, c2], False), ([c2], False)])
    settings = api.serve(monkeypatch)
    indexed: list[set[str]] = []

    def names() -> set[str]:
        return {str(entry) for index in processor.keywords["indexers"].values()
                for store in index.index.values() for entry in store}

    async def kopf_watcher(**_: Any) -> None:
        async for raw_event in watching.infinite_watch(settings=settings, resource=RESOURCE, namespace=None,
                                                       _iterations=2):
            if isinstance(raw_event, dict):
                await process(raw_event)
            elif api.connection == 1:
                indexed.append(names())
    try:
        await requeue.wrap_watcher(kopf_watcher)(settings=settings, resource=RESOURCE, operator_paused=None,
                                                 processor=processor)
        assert any("c1" in entry for entry in indexed[0]) and any("c2" in entry for entry in indexed[0])
        assert not any("c1" in entry for entry in names()) and any("c2" in entry for entry in names())
    finally:
        for body in (c1, c2):
            await process({"type": "DELETED", "object": body})


class InitialStreams:
    """The API server as Kopf's watch sees it with ``settings.watching.initial_streaming``: one
    script per ``watch_objs`` call; an initial stream's end is its first BOOKMARK."""

    def __init__(self, scripts: list[list[dict[str, Any]]]) -> None:
        self.scripts = scripts
        self.calls: list[str | None] = []

    async def watch_objs(self, *, since: str | None = None, **_: Any) -> AsyncIterator[dict[str, Any]]:
        self.calls.append(since)
        for raw_input in self.scripts[len(self.calls) - 1]:
            yield raw_input


def event(kind: str, name: str, version: str) -> dict[str, Any]:
    found = body(name)
    found["metadata"]["resourceVersion"] = version
    return {"type": kind, "object": found}


def bookmark(version: str) -> dict[str, Any]:
    return {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": version}}}


GONE = {"type": "ERROR", "object": {"code": 410}}


@SELECTING_KOPF
async def test_a_cut_initial_stream_does_not_drop_an_object_still_selected(
        listings: selection.Listings, monkeypatch: pytest.MonkeyPatch) -> None:
    """x and y are selected. After "410 Gone", Kopf's new initial stream sends y, then its
    connection drops; Kopf resumes from y's resourceVersion (no initial events asked again), and the
    first BOOKMARK there ends the "initial streaming" (Kopf yields LISTED). x never left the selection
    (no DELETED): it must still read as selected, else its recheck drops it as gone (stranded until
    its next event; the LIST this replaced answers right)."""
    streams = InitialStreams([
        [event("ADDED", "x", "10"), event("ADDED", "y", "11"), bookmark("12"), GONE],
        [event("ADDED", "y", "20")],  # the connection drops midway through the initial events
        [bookmark("30"), GONE],
    ])
    monkeypatch.setattr(watching, "watch_objs", streams.watch_objs)
    settings = configuration.OperatorSettings()
    settings.watching.reconnect_backoff = 0
    settings.watching.initial_streaming = True
    monkeypatch.setattr(watching, "continuous_watch", requeue.wrap_watch(watching.continuous_watch))
    async for _ in watching.infinite_watch(settings=settings, resource=RESOURCE, namespace=None, _iterations=2):
        pass
    assert streams.calls == [None, None, "20"]  # Kopf's own reconnection, as described
    # Such a stream cannot vouch (the API server is asked instead): never read as left.
    assert listings.holds(body("y")) is not False
    assert listings.holds(body("x")) is not False


COMPLETE = [[event("ADDED", "x", "10"), event("ADDED", "y", "11"), bookmark("12"), GONE],
            [event("ADDED", "y", "20"), event("ADDED", "x", "21"), bookmark("30"), GONE]]
CUT = [[event("ADDED", "x", "10"), event("ADDED", "y", "11"), bookmark("12"), GONE],
       [event("ADDED", "y", "20")],  # the connection drops midway through the initial events
       [bookmark("30"), GONE]]


@pytest.mark.parametrize("scripts", [
    pytest.param(COMPLETE, id="complete"),  # the guard: the harness drops nothing still listed
    pytest.param(CUT, id="cut"),
])
async def test_after_a_relist_the_recheck_of_an_object_still_selected_runs(
        scripts: list[list[dict[str, Any]]], listings: selection.Listings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The consequence of the cut initial stream above, in the patched worker: x's recheck (its last
    event queued again) must run, not be dropped as if x had left the selection."""
    import functools
    import types

    streams = InitialStreams(scripts)
    monkeypatch.setattr(watching, "watch_objs", streams.watch_objs)
    settings = configuration.OperatorSettings()
    if not hasattr(settings.watching, "label_selectors"):
        pytest.skip("Kopf < 1.45 selects nothing on the server")  # nothing is read off the stream there
    settings.watching.reconnect_backoff = 0
    settings.watching.initial_streaming = True
    settings.watching.label_selectors[RESOURCE.plural] = "shard=a"
    monkeypatch.setattr(watching, "continuous_watch", requeue.wrap_watch(watching.continuous_watch))
    async for _ in watching.infinite_watch(settings=settings, resource=RESOURCE, namespace=None, _iterations=2):
        pass

    seen: list[Any] = []
    told: list[Any] = []

    async def process_resource_event(*, raw_event: Any, **_: Any) -> None:
        seen.append(raw_event)

    recheck = requeue.Requeued(event("MODIFIED", "x", "10"))

    async def kopf_worker(*, processor: Any, streams: Any, key: str) -> None:
        await processor(raw_event=recheck)

    worker = requeue.wrap_worker(kopf_worker, lambda resource, body: told.append(body))
    await worker(processor=functools.partial(process_resource_event, settings=settings, registry=None,
                                             resource=RESOURCE),
                 streams={"k": types.SimpleNamespace(backlog=asyncio.Queue())}, key="k")
    assert told == []
    assert seen == [recheck]


@SELECTING_KOPF
async def test_stock_parity_the_watch_stream_is_kopfs_own_where_nothing_is_selected_and_unchanged_where_it_is(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Guard (stock parity): with no server-side selection Kopf's watcher gets Kopf's own generator;
    with one, every event and bookmark in the same order, the same objects."""
    api = ScriptedApi([([body("x"), body("y")], False), ([body("y")], True), ([], False)])
    monkeypatch.setattr(fetching, "fetch_objs", api.fetch_objs)
    monkeypatch.setattr(watching, "watch_objs", api.watch_objs)
    settings = configuration.OperatorSettings()
    settings.watching.reconnect_backoff = 0
    sentinel = object()

    def kopfs(**_: Any) -> Any:
        return sentinel
    assert requeue._listings.get() is None
    assert requeue.wrap_watch(kopfs)(settings=settings) is sentinel

    async def collect(stream: AsyncIterator[Any]) -> list[Any]:
        return [raw_event async for raw_event in stream]
    stock = await collect(watching.infinite_watch(settings=settings, resource=RESOURCE, namespace=None, _iterations=3))
    api.connection = 0
    token = requeue._listings.set(selection.Listings())
    try:
        monkeypatch.setattr(watching, "continuous_watch", requeue.wrap_watch(watching.continuous_watch))
        ours = await collect(watching.infinite_watch(settings=settings, resource=RESOURCE, namespace=None,
                                                     _iterations=3))
    finally:
        requeue._listings.reset(token)
    assert ours == stock and len(ours) == 5  # x, y, LISTED; y (cut); LISTED
