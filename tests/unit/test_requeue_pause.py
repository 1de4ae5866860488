"""
Rechecks obey Kopf's pause (peering): Kopf's own worker and toggles, with the patch's wrappers.

A paused replica queues no recheck, and runs none queued before the pause; events from the watch
stream are Kopf's to process as it always does (stock parity). The pause reaches the workers from
their watcher (every supported Kopf passes it there) or from the processor (Kopf >= 1.44.1).
"""
from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

from kopf._cogs.aiokits import aiotoggles
from kopf._cogs.configs import configuration
from kopf._core.reactor import queueing

from kopf_outcomes._kopf import requeue

KEY = ("resource", "uid-1")
EVENT = {"type": None, "object": {"metadata": {"name": "n", "uid": "uid-1", "resourceVersion": "1"}}}
INTERVAL = 0.05


class Processor:
    """Kopf's processor as the patched apply() sees it: every run schedules a recheck INTERVAL later."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def __call__(self, *, raw_event: dict[str, Any], stream_pressure: asyncio.Event, **_: Any) -> None:
        self.events.append(raw_event)
        loop = asyncio.get_running_loop()
        await requeue.sleep_and_requeue(loop.time() + INTERVAL, stream_pressure)


async def run_worker(processor: Callable[..., Awaitable[Any]], pause: aiotoggles.ToggleSet | None,
                     events: list[dict[str, Any]], *, for_s: float, via: str = "watcher",
                     during: Callable[[queueing.Stream], Awaitable[None]] | None = None) -> None:
    """Kopf's real worker, wrapped as installed, fed ``events``; the pause given as Kopf gives it."""
    settings = configuration.OperatorSettings()
    if hasattr(settings, "queueing"):
        settings.queueing.idle_timeout = 10
    else:  # "batching" before Kopf 1.38, where every event waits a window for more
        settings.batching.idle_timeout = 10
        settings.batching.batch_window = 0.001
    stream = queueing.Stream(backlog=asyncio.Queue(), pressure=asyncio.Event())
    for event in events:
        stream.backlog.put_nowait(event)
    if via == "processor":  # Kopf >= 1.44.1 binds the pause to the processor (functools.partial)
        processor = functools.partial(processor, operator_paused=pause)
    worker = requeue.wrap_worker(queueing.worker, lambda resource, body: None)

    async def watcher(**_: Any) -> None:  # Kopf's watcher spawns its workers as tasks of its own
        task = asyncio.create_task(worker(signaller=asyncio.Condition(), settings=settings, processor=processor,
                                          resource_indexed=None, operator_indexed=None,
                                          streams={KEY: stream}, key=KEY))
        try:
            if during is not None:
                await during(stream)
            await asyncio.sleep(for_s)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    wrapped = requeue.wrap_watcher(watcher)
    await wrapped(operator_paused=pause if via == "watcher" else None)


async def toggles(paused: bool) -> tuple[aiotoggles.ToggleSet, aiotoggles.Toggle]:
    pause = aiotoggles.ToggleSet(any)
    toggle = await pause.make_toggle(paused, name="a peer of higher priority")
    return pause, toggle


async def test_an_active_worker_rechecks_again_and_again() -> None:
    processor = Processor()
    pause, _ = await toggles(False)
    await run_worker(processor, pause, [EVENT], for_s=INTERVAL * 6)
    assert len(processor.events) >= 4
    assert all(type(event) is requeue.Requeued for event in processor.events[1:])


async def test_a_paused_worker_queues_no_recheck() -> None:
    processor = Processor()
    pause, _ = await toggles(True)
    await run_worker(processor, pause, [EVENT], for_s=INTERVAL * 6)
    assert processor.events == [EVENT]  # the watch stream's event is Kopf's (stock); no recheck after it


async def test_a_paused_worker_queues_no_recheck_with_the_pause_given_to_the_processor() -> None:
    processor = Processor()
    pause, _ = await toggles(True)
    await run_worker(processor, pause, [EVENT], for_s=INTERVAL * 6, via="processor")
    assert processor.events == [EVENT]


async def test_pausing_mid_wait_stops_the_rechecks_and_the_listing_on_resume_starts_them_again() -> None:
    processor = Processor()
    pause, toggle = await toggles(False)
    counts: list[int] = []

    async def pause_then_resume(stream: queueing.Stream) -> None:
        await asyncio.sleep(INTERVAL * 3.5)
        await toggle.turn_to(True)
        counts.append(len(processor.events))
        await asyncio.sleep(INTERVAL * 6)
        counts.append(len(processor.events))
        await toggle.turn_to(False)
        stream.pressure.set()  # Kopf lists the objects again on resume: the watcher queues the event
        await stream.backlog.put(EVENT)
        await asyncio.sleep(INTERVAL * 4.5)
        counts.append(len(processor.events))

    await run_worker(processor, pause, [EVENT], for_s=0, during=pause_then_resume)
    paused_at, resumed_at, after = counts
    assert paused_at >= 3
    assert resumed_at == paused_at  # the recheck already asleep when the pause came is dropped at its time
    assert processor.events[resumed_at] is EVENT  # then the listing's event, and the rechecks after it
    assert after >= resumed_at + 3


async def test_a_recheck_queued_before_the_pause_is_not_run_during_it() -> None:
    processor = Processor()
    pause, _ = await toggles(True)
    await run_worker(processor, pause, [requeue.Requeued(EVENT), requeue.Requeued(EVENT)], for_s=INTERVAL * 3)
    assert processor.events == []


async def test_a_recheck_queued_while_active_runs() -> None:
    processor = Processor()
    pause, _ = await toggles(False)
    await run_worker(processor, pause, [requeue.Requeued(EVENT)], for_s=INTERVAL * 0.5)
    assert processor.events == [requeue.Requeued(EVENT)]


async def test_without_a_pause_the_worker_rechecks_as_before() -> None:
    processor = Processor()
    await run_worker(processor, None, [EVENT], for_s=INTERVAL * 4)
    assert len(processor.events) >= 3
