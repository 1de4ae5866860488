"""
Rechecks without writes: a handler that concludes ``Pending(recheck=...)`` about the same state as
before runs again from the operator's memory, not through Kopf's stored delay and "touch-dummy".

The schedule is a grid anchored where the conclusion began: ``since + k * recheck`` (both stored
once, in the handler's memory, when the conclusion first holds), so it survives a restart without
a write: after one, a handler runs at its next grid point, not at once and not never. A recheck
missed while the operator was down runs at the next grid point, at most one interval late.

Between two runs the object's worker sleeps in Kopf's ``apply`` (as Kopf's own delays do, woken
early by any new event of the object), and then puts the object's last event back into its own
queue: the next run costs a read of nothing and a write of nothing.
"""
from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import datetime
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kopf_outcomes._kopf.internals import changes_only, operator_registry
from kopf_outcomes.memory import MemoryRecord

TOLERANCE = 0.5  # seconds: a grid point this close is due now


@dataclasses.dataclass
class Stream:
    """The object's own queue of events, and the event being processed now."""

    backlog: asyncio.Queue[Any]
    raw_event: Mapping[str, Any]


_stream: contextvars.ContextVar[Stream | None] = contextvars.ContextVar("kopf_outcomes_stream", default=None)


def recheck_of(record: MemoryRecord | None) -> float | None:
    return record.get("recheck") if record is not None and record["outcome"] == "pending" else None


def next_due(record: MemoryRecord, now: datetime.datetime) -> datetime.datetime | None:
    """The next grid point at or after ``now`` (within the tolerance); None if the record has none."""
    interval, since = record.get("recheck"), record.get("since")
    if not interval or not since:
        return None
    try:
        start = datetime.datetime.fromisoformat(since)
    except ValueError:
        return None
    if start.tzinfo is None:
        start = start.replace(tzinfo=datetime.timezone.utc)
    try:  # a forged ``since`` (year 9999) must not raise out of Kopf's cycle: read as no schedule
        elapsed = (now - start).total_seconds() - TOLERANCE
        steps = max(1, math.ceil(elapsed / interval))
        return start + datetime.timedelta(seconds=steps * interval)
    except (OverflowError, ValueError):
        return None


class Requeued(dict[str, Any]):
    """The object's last watch event, queued again by us for a recheck: marked, so that only the
    change handlers see it (Kopf's indexers and ``@kopf.on.event`` handlers never saw a repeat)."""


def quiet_attempts(record: MemoryRecord | None, now: datetime.datetime) -> int:
    """The rechecks run quietly since the conclusion was stored: attempts that Kopf's ``retry``
    does not count (a quiet recheck stores nothing), read off the grid without a write."""
    interval, since = recheck_of(record), record.get("since") if record is not None else None
    if not interval or not since:
        return 0
    try:
        start = datetime.datetime.fromisoformat(since)
        if start.tzinfo is None:
            start = start.replace(tzinfo=datetime.timezone.utc)
        return max(0, math.floor(((now - start).total_seconds() + TOLERANCE) / interval) - 1)
    except (OverflowError, ValueError):
        return 0


def wrap_worker(original: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """Kopf's per-object worker, with the object's queue and current event known to apply(), and
    the operator's registry known to the cycles (every handler's result is the operator's write)."""
    async def worker(**kwargs: Any) -> None:
        stream = kwargs["streams"][kwargs["key"]]
        processor = kwargs["processor"]
        registry = getattr(processor, "keywords", {}).get("registry")  # Kopf's partial of its processor
        operator_registry.set(registry)  # this worker's task: the cycles of this object

        async def processing(**processor_kwargs: Any) -> Any:
            raw_event = processor_kwargs["raw_event"]
            token = _stream.set(Stream(stream.backlog, raw_event))
            try:
                if isinstance(raw_event, Requeued) and registry is not None:
                    return await processor(**processor_kwargs, registry=changes_only(registry))
                return await processor(**processor_kwargs)
            finally:
                _stream.reset(token)

        await original(**{**kwargs, "processor": processing})
    return worker


async def sleep_and_requeue(deadline: float, pressure: asyncio.Event | None) -> None:
    """Sleep until the loop time ``deadline`` or a new event; then queue the object's event again."""
    stream = _stream.get()
    if stream is None:
        return
    delay = deadline - asyncio.get_running_loop().time()
    if delay > 0:
        if pressure is None:
            await asyncio.sleep(delay)
        else:
            try:
                await asyncio.wait_for(pressure.wait(), timeout=delay)
                return  # a new event came: it runs the cycle, which schedules anew
            except asyncio.TimeoutError:
                pass
    if stream.backlog.empty():
        stream.backlog.put_nowait(Requeued(stream.raw_event))
