"""
Rechecks without writes: a handler that concludes ``Pending(recheck=...)`` about the same state as
before runs again from the operator's memory, not through Kopf's stored delay and "touch-dummy".
The schedule is a grid stored once in the handler's memory, so a restart needs no write (the grid and
its phase: docs/outcomes.md; a point just passed at a fresh listing: :func:`next_due`). Between runs
the object's worker sleeps in Kopf's ``apply`` and queues its last event again: a run reads and writes
nothing. Kopf's pause (peering) is obeyed: docs/explanation/attachment.md, ``queueing.watcher``.
A watched object's change wakes the parents waiting on it as Kopf indexes it (:func:`wrap_index_resource`).
"""
from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import datetime
import functools
import hashlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Protocol

from kopf_outcomes import objects, shards
from kopf_outcomes._kopf import held, listing, selection
from kopf_outcomes._kopf.internals import changes_only, operator_registry, operator_resource, processor_keywords
from kopf_outcomes.memory import MemoryRecord

TOLERANCE = 0.5  # seconds: a grid point this close is due now
SPREAD = 0.1  # the share of its interval over which the grids of conclusions made together are spread


class Pause(Protocol):
    """Kopf's ``operator_paused`` toggle set (``aiotoggles.ToggleSet``): on while the operator is paused."""

    def is_on(self) -> bool: ...


class Requeued(dict[str, Any]):
    """The object's last event, queued again by a recheck (not by Kopf's watch stream): marked, so
    that only the change handlers see it (Kopf's indexers and ``@kopf.on.event`` handlers never
    saw a repeat), and a paused replica drops it."""


@dataclasses.dataclass
class Stream:
    """The object's own queue of events, the event being processed now, and Kopf's pause."""

    backlog: asyncio.Queue[Any]
    raw_event: Mapping[str, Any]
    pause: Pause | None = None

    def paused(self) -> bool:
        return self.pause is not None and self.pause.is_on()


# Set by the watcher of a resource (Kopf passes it the pause), inherited by its workers' tasks.
_pause: contextvars.ContextVar[Pause | None] = contextvars.ContextVar("kopf_outcomes_pause", default=None)
_stream: contextvars.ContextVar[Stream | None] = contextvars.ContextVar("kopf_outcomes_stream", default=None)
# Set by the watcher of a resource that the API server selects: what its watch stream says is selected.
_listings: contextvars.ContextVar[selection.Listings | None] = contextvars.ContextVar(
    "kopf_outcomes_listings", default=None)
# When this object's worker last ran each rechecking handler (the worker's own: forgotten with it).
_runs: contextvars.ContextVar[dict[str, datetime.datetime] | None] = contextvars.ContextVar(
    "kopf_outcomes_runs", default=None)


def recheck_of(record: MemoryRecord | None) -> float | None:
    return record.get("recheck") if record is not None and record["outcome"] == "pending" else None


def next_due(record: MemoryRecord, now: datetime.datetime, *, after: bool = False,
             served: bool = False) -> datetime.datetime | None:
    """The next grid point at or after ``now`` (within the tolerance), or strictly after it; with
    ``served``, after a run at ``now``: strictly after the point that run served, which may lie up
    to the tolerance after it (a run that early is due). None if the record has none, or one that
    would overflow (forged)."""
    interval, start = record.get("recheck"), _since(record)
    if not interval or start is None:
        return None
    try:
        elapsed = (now - start).total_seconds() + (TOLERANCE if served else 0.0)
        if after:
            steps = math.floor(elapsed / interval) + 1
        else:
            # A point just passed is due now for a wake-up of this replica (it slept until then), but
            # not for a fresh listing (a restart, a resume, a takeover): the replica active then ran it.
            steps = max(1, math.ceil((elapsed - (0.0 if listed() else TOLERANCE)) / interval))
        return start + datetime.timedelta(seconds=steps * interval)
    except (OverflowError, ValueError):
        return None


def quiet_attempts(record: MemoryRecord | None, now: datetime.datetime) -> int:
    """The rechecks run quietly since the conclusion was stored: attempts that Kopf's ``retry``
    does not count (a quiet recheck stores nothing), read off the grid without a write."""
    interval, start = recheck_of(record), _since(record) if record is not None else None
    if not interval or start is None:
        return 0
    try:
        return max(0, math.floor(((now - start).total_seconds() + TOLERANCE) / interval) - 1)
    except (OverflowError, ValueError):
        return 0


def ran(handler_id: str) -> None:
    """This worker has just run a rechecking handler (its own write's event must not rerun it)."""
    runs = _runs.get()
    if runs is not None:
        runs[handler_id] = datetime.datetime.now(datetime.timezone.utc)


def last_run(handler_id: str) -> datetime.datetime | None:
    runs = _runs.get()
    return runs.get(handler_id) if runs is not None else None


def _since(record: MemoryRecord) -> datetime.datetime | None:
    """The grid's anchor: where the conclusion began, moved on by the record's own phase."""
    since = record.get("since") or ""
    try:
        start = datetime.datetime.fromisoformat(since)
    except ValueError:
        return None
    start = start if start.tzinfo is not None else start.replace(tzinfo=datetime.timezone.utc)
    return start + datetime.timedelta(seconds=phase(since, record.get("recheck") or 0.0))


def phase(since: str, interval: float) -> float:
    """Seconds by which a grid is moved on: up to ``SPREAD`` of its interval, fixed by the stored
    start (to the microsecond), so that objects that concluded in the same second recheck apart and
    stay apart, and a restart finds the same grid (stock Kopf's delays drift apart by themselves)."""
    share = int.from_bytes(hashlib.sha256(since.encode()).digest()[:4], "big") / 2**32
    return share * SPREAD * interval


def listed() -> bool:
    """Whether this cycle processes Kopf's listing of the object (not a watch event, not a recheck)."""
    stream = _stream.get()
    return stream is not None and stream.raw_event.__class__ is not Requeued and stream.raw_event.get("type") is None


def wrap_watcher(original: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """Kopf's watcher of a resource, whose workers learn Kopf's pause (every supported Kopf passes it)
    and, where the API server selects, what its watch stream says is still selected; known to
    :mod:`.listing` until it has listed its resource. Where its objects fill our indices, a complete
    relisting also tells :func:`.objects.left` of those it no longer holds (they went unseen)."""
    async def watcher(**kwargs: Any) -> None:
        _pause.set(kwargs.get("operator_paused"))  # in the watcher's own task: its workers inherit it
        keywords, resource = processor_keywords(kwargs.get("processor")), kwargs.get("resource")
        own = listing.own_indices(keywords.get("registry"), resource)
        if any(selection.server_selection(kwargs.get("settings"), resource)) or own:
            left = functools.partial(_left_unseen, keywords.get("indexers"), own or frozenset())
            _listings.set(selection.Listings(left))  # its stream (wrap_watch) and its workers share it
        await listing.watched(original, kwargs)  # an index is complete once listed (unknown is not none)
    return watcher


def _left_unseen(indexers: Any, own: frozenset[str], gone: list[selection.Unlisted]) -> None:
    """Objects a complete relisting no longer holds, with no DELETED seen (they went while the watch
    was down): Kopf keeps them in its indices until a restart, so a parent waiting on them would wait
    for good. Out of our own indices first (the user's are Kopf's, left as Kopf keeps them), then
    their parents are woken: they compare against indices without them."""
    for uid, namespace, name in gone:
        body = {"metadata": {"namespace": namespace, "name": name, "uid": uid}}
        for index_id in own:
            indexer = indexers.get(index_id) if indexers is not None else None
            if indexer is not None:
                indexer.discard(indexers.make_key(body))
    objects.left([uid for uid, _, _ in gone])


def wrap_watch(original: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    """Kopf's ``watching.continuous_watch`` (one connection: a listing, then its watch), noted on the
    way where its watcher keeps :class:`.selection.Listings`."""
    def continuous_watch(**kwargs: Any) -> AsyncIterator[Any]:
        listings = _listings.get()
        stream = original(**kwargs)
        if listings is None:
            return stream
        watching = getattr(kwargs.get("settings"), "watching", None)
        return listings.stamped(stream, initial_streaming=bool(getattr(watching, "initial_streaming", False)))
    return continuous_watch


def wrap_index_resource(original: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """Kopf's ``indexing.index_resource``, which then wakes the parents of the object it indexed:
    before the object's own handlers run (woken after them, a parent learnt of a waiting child a
    recheck interval later), and after Kopf replaced its entries (woken before, a parent would find
    the old ones and conclude as before)."""
    async def index_resource(**kwargs: Any) -> None:
        raw_event = kwargs["raw_event"]
        try:
            await original(**kwargs)
        finally:  # an indexing that failed midway may have changed the index too: wake (a needless one costs nothing)
            if objects.declared and raw_event.__class__ is not Requeued:  # a recheck indexes nothing
                objects.changed(raw_event.get("object"), gone=raw_event.get("type") == "DELETED",
                                indices=listing.own_indices(kwargs.get("registry"), kwargs.get("resource")))
    return index_resource


Gone = Callable[[Any, Mapping[str, Any]], None]  # Kopf's resource, the object's last state


def wrap_worker(original: Callable[..., Awaitable[None]], gone: Gone) -> Callable[..., Awaitable[None]]:
    """Kopf's per-object worker, with the object's queue and current event known to apply(), and
    the operator's registry known to the cycles (every handler's result is the operator's write);
    ``gone`` is told each object whose deletion Kopf has processed, and each that moved to another
    shard where Kopf filters by the declared shard's label (:func:`moved_away`)."""
    async def worker(**kwargs: Any) -> None:
        stream = kwargs["streams"][kwargs["key"]]
        processor = kwargs["processor"]
        keywords = processor_keywords(processor)
        pause = _pause.get()  # its watcher's, or else the processor's (Kopf >= 1.44.1 binds it there)
        pause = pause if pause is not None else keywords.get("operator_paused")
        registry, resource, settings = keywords.get("registry"), keywords.get("resource"), keywords.get("settings")
        operator_registry.set(registry)  # this worker's task: the cycles of this object
        operator_resource.set(resource)
        sharded = held.shards_resource(registry, resource)
        held.sharded.set(sharded)  # a declared shard refuses only its resource's
        _runs.set({})
        selected = selection.server_selection(settings, resource)  # what the API server sends of it (Kopf 1.45)
        away = False  # the object is another shard's, and ``gone`` was told

        async def processing(**processor_kwargs: Any) -> Any:
            nonlocal away
            raw_event = processor_kwargs["raw_event"]
            if sharded is True and raw_event.__class__ is not Requeued and raw_event.get("type") != "DELETED":
                away = moved_away(raw_event.get("object") or {}, away, lambda body: gone(resource, body))
            if raw_event.__class__ is Requeued:
                if pause is not None and pause.is_on():
                    return None  # a recheck queued before the pause: not this replica's to run now
                last = raw_event.get("object") or {}
                if any(selected) and not await still_selected(settings, resource, selected, last):
                    gone(resource, last)  # it left this watch unseen: as if deleted
                    return None
            token = _stream.set(Stream(stream.backlog, raw_event, pause))
            try:
                if raw_event.__class__ is Requeued and registry is not None:
                    return await processor(**processor_kwargs, registry=changes_only(registry))
                return await processor(**processor_kwargs)
            finally:
                _stream.reset(token)
                if raw_event.get("type") == "DELETED":
                    gone(resource, raw_event.get("object") or {})

        await original(**{**kwargs, "processor": processing})
    return worker


def moved_away(body: Mapping[str, Any], away: bool, gone: Callable[[Mapping[str, Any]], None]) -> bool:
    """Whether the object of a resource that the declared shard divides is another shard's now;
    ``gone`` told once when it moves away. Where Kopf filters by the shard's label (Kopf < 1.45, or
    no server-side selection), it still sends the object but runs none of its handlers here, and no
    cycle says that nothing of it waits here any more (the API server's selection sends a DELETED
    instead). Told before Kopf's processing: a handler of the resource that does not filter by the
    shard, and still runs here, says again in its cycle what of the object waits."""
    others = shards.others(body)
    if others and not away:
        gone(body)
    return others


async def still_selected(settings: Any, resource: Any, selected: selection.Selection, body: Mapping[str, Any]) -> bool:
    """Whether the API server still sends this object to the watch: read off the watch's own stream
    (no request); asked of the API server only where the stream is not known here."""
    listings = _listings.get()
    held = listings.holds(body) if listings is not None else None
    if held is not None:
        return held
    return await selection.still_selected(settings, resource, selected, body)


async def sleep_and_requeue(deadline: float | None, pressure: asyncio.Event | None,
                            wake: asyncio.Event | None = None) -> None:
    """Sleep until the loop time ``deadline`` (None: no end), a new event, or ``wake`` (the
    parked handlers' other objects changed); then queue the object's event again."""
    stream = _stream.get()
    if stream is None or (deadline is None and wake is None):
        return
    waits = [asyncio.ensure_future(event.wait()) for event in (pressure, wake) if event is not None]
    delay = None if deadline is None else deadline - asyncio.get_running_loop().time()
    try:
        if waits and (delay is None or delay > 0):
            await asyncio.wait(waits, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
        elif delay is not None and delay > 0:
            await asyncio.sleep(delay)
    finally:
        for waiting in waits:
            waiting.cancel()
    if pressure is not None and pressure.is_set():
        return  # a new event came: it runs the cycle, which schedules anew
    if stream.paused():
        return  # Kopf lists the object again on resume; its cycle schedules the recheck anew
    if stream.backlog.empty():
        stream.backlog.put_nowait(Requeued(stream.raw_event))
