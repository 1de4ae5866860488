"""
Scenario 1 — the overhead of one handler run, in process, no network.

Kopf's ``execute_handler_once`` is timed with and without the patch, on the same handler,
cause and state as Kopf's own processing builds them: a delete handler registered with
``@kopf.on.delete`` in a registry, a ``ChangingCause`` with an ``ObjectLogger``, progress from
``State.from_scratch()``. Logging is set up as under ``kopf run`` (INFO, text format; the
stream goes to /dev/null), with Kopf's default posting settings (since Kopf 1.45, log lines
are not posted as Events unless ``settings.posting.loggers`` is set), so a run costs what it
costs in an operator, minus the terminal.

Stock and ours alternate round by round (``uninstall()``/``install()`` between rounds, the
order rotated every round); the report gives the medians over the rounds of the per-call time,
their ratio, and the median of the per-pair ratios.

A third side, the **floor**, is measured in the same rounds: Kopf with two pass-through coroutine
layers around ``execute_handler_once`` and ``invoke_handler`` and nothing else: the least that
any patch adds which reads a handler's outcome before Kopf logs it (see the benchmarks README).
"""
from __future__ import annotations

import asyncio
import gc
import logging
import os
import statistics
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import kopf
from kopf._cogs.configs import configuration
from kopf._cogs.structs import bodies, ephemera, patches, references
from kopf._core.actions import execution, lifecycles, loggers, progression
from kopf._core.engines import posting
from kopf._core.intents import causes, registries

import kopf_outcomes
from benchmarks.common import ratio, say

OBSERVERS = 5
WARM_CALLS = 5


async def trivial_async(**_: Any) -> None:
    return None


def trivial_sync(**_: Any) -> None:
    return None


HANDLERS: dict[str, Callable[..., Any]] = {"async": trivial_async, "sync": trivial_sync}


class Observer:
    """A trivial observer plugin: told about every decision, does nothing with it."""

    @kopf_outcomes.hookimpl
    def kopf_outcomes_observe_outcome(self, run: kopf_outcomes.HandlerRun,
                                      outcome: kopf_outcomes.Outcome,
                                      patch: MutableMapping[str, Any]) -> None:
        return None


PLUGIN_SETS: dict[str, Callable[[], list[object]]] = {
    "builtins_only": lambda: [],
    "five_observers": lambda: [Observer() for _ in range(OBSERVERS)],
}


class Floor:
    """Two pass-through coroutine layers where kopf-outcomes has its two: no logic at all."""

    def __init__(self) -> None:
        self.execute_handler_once = execution.execute_handler_once  # Kopf's own: taken while uninstalled
        self.invoke_handler = execution.invoke_handler

    def attach(self) -> None:
        execute_original, invoke_original = self.execute_handler_once, self.invoke_handler

        async def invoke_handler(**kwargs: Any) -> Any:
            return await invoke_original(**kwargs)

        async def execute_handler_once(
            settings: Any, handler: Any, cause: Any, state: Any, lifecycle: Any = None,
            extra_context: Any = execution.no_extra_context,
            default_errors: Any = execution.ErrorsMode.TEMPORARY,
        ) -> Any:
            return await execute_original(settings=settings, handler=handler, cause=cause, state=state,
                                          lifecycle=lifecycle, extra_context=extra_context,
                                          default_errors=default_errors)

        execution.invoke_handler = invoke_handler
        execution.execute_handler_once = execute_handler_once

    def detach(self) -> None:
        execution.invoke_handler = self.invoke_handler
        execution.execute_handler_once = self.execute_handler_once


class Subject:
    """One handler with its cause and state, built as Kopf's processing builds them."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        registry = registries.OperatorRegistry()
        kopf.on.delete("kopf.dev", "v1", "kopfexamples", id="delete_fn", registry=registry)(fn)
        [self.handler] = registry._changing.get_all_handlers()
        self.settings = configuration.OperatorSettings()
        body = bodies.Body({
            "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
            "metadata": {"name": "bench", "namespace": "bench", "uid": "00000000-bench",
                         "deletionTimestamp": "2024-01-01T00:00:00Z",
                         "finalizers": ["kopf.zalando.org/KopfFinalizerMarker"],
                         "labels": {"app": "bench"}, "annotations": {"example.com/owner": "bench"}},
            "spec": {"field": "value", "items": ["item1", "item2"]},
        })
        self.cause = causes.ChangingCause(
            logger=loggers.ObjectLogger(body=body, settings=self.settings),
            indices={},
            resource=references.Resource("kopf.dev", "v1", "kopfexamples"),
            patch=patches.Patch(), body=body, memo=ephemera.AnyMemo(ephemera.Memo()),
            initial=False, reason=causes.Reason("delete"),
        )
        self.states = progression.State.from_scratch().with_handlers([self.handler])
        self.state = self.states[self.handler.id]

    async def run(self, calls: int, entry: str = "handler") -> float:
        """
        Microseconds per call of whatever Kopf function is installed now: ``execute_handler_once``
        (one handler run) or, for ``entry="cycle"``, ``execute_handlers_once`` with this one
        handler and Kopf's default lifecycle (one reaction cycle, as the processing calls it).
        """
        handler, cause, settings = self.handler, self.cause, self.settings
        kwargs: dict[str, Any]
        execute: Callable[..., Awaitable[Any]]
        if entry == "handler":
            execute = execution.execute_handler_once  # looked up after (un)install, as Kopf does
            kwargs = dict(settings=settings, handler=handler, cause=cause, state=self.state)
        else:
            execute = execution.execute_handlers_once
            kwargs = dict(lifecycle=lifecycles.asap, settings=settings, handlers=[handler],
                          cause=cause, state=self.states)
        for _ in range(WARM_CALLS):  # caches, and the first call after (un)install, stay out
            await execute(**kwargs)
        started = time.perf_counter_ns()
        for _ in range(calls):
            await execute(**kwargs)
        return (time.perf_counter_ns() - started) / calls / 1000


def logging_as_kopf_run() -> tuple[Callable[[], None], Callable[[], None]]:
    """Kopf's own logging set-up (INFO, text) into /dev/null; Events (if posted) into a queue."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    loggers.configure()
    devnull = open(os.devnull, "w")  # noqa: SIM115 — closed by restore()
    streams = [(handler, handler.setStream(devnull)) for handler in root.handlers
               if isinstance(handler, logging.StreamHandler)]
    queue: asyncio.Queue[Any] = asyncio.Queue()
    posting.event_queue_var.set(queue)
    posting.event_queue_loop_var.set(asyncio.get_running_loop())

    def drain() -> None:
        while not queue.empty():
            queue.get_nowait()

    def restore() -> None:
        for handler, stream in streams:  # a handler kept from before (pytest's) gets its own back
            if stream is not None:
                handler.setStream(stream)
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        devnull.close()

    return drain, restore


SIDES = ("stock", "floor", "ours")


async def _measure(kind: str, plugin_set: str, *, rounds: int, calls: int,
                   warmup: int, entry: str = "handler") -> dict[str, Any]:
    subject = Subject(HANDLERS[kind])
    kopf_outcomes.uninstall()
    floor = Floor()
    times: dict[str, list[float]] = {side: [] for side in SIDES}
    drain, restore = logging_as_kopf_run()
    try:
        for index in range(warmup + rounds):
            measured: dict[str, float] = {}
            shift = index % len(SIDES)  # each side goes first, second and last in turn
            for side in SIDES[shift:] + SIDES[:shift]:
                kopf_outcomes.uninstall()
                floor.detach()
                if side == "ours":
                    kopf_outcomes.install(plugins=PLUGIN_SETS[plugin_set](), entry_points=False)
                elif side == "floor":
                    floor.attach()
                drain()
                gc.collect()
                measured[side] = await subject.run(calls, entry)
            if index >= warmup:
                for side in SIDES:
                    times[side].append(measured[side])
    finally:
        kopf_outcomes.uninstall()
        floor.detach()
        restore()
    stock, floor_times, ours = times["stock"], times["floor"], times["ours"]
    stock_us, floor_us, ours_us = (statistics.median(times[side]) for side in SIDES)
    return {
        "stock_us": round(stock_us, 2),
        "ours_us": round(ours_us, 2),
        "ratio": ratio(ours_us, stock_us),
        "paired_ratio_median": statistics.median(o / s for o, s in zip(ours, stock, strict=True)),
        "added_us": round(ours_us - stock_us, 2),
        "floor_us": round(floor_us, 2),
        "floor_ratio": ratio(floor_us, stock_us),
        "floor_paired_ratio_median": statistics.median(f / s for f, s in zip(floor_times, stock, strict=True)),
        "rounds": rounds,
        "calls_per_round": calls,
    }


async def run(*, quick: bool) -> dict[str, Any]:
    # Many short rounds: the machine is shared, and its load drifts; pairs close in time cancel it.
    rounds = 30 if quick else 200
    warmup = 3 if quick else 10
    calls = {"async": 100 if quick else 200, "sync": 30 if quick else 60}
    report: dict[str, Any] = {
        "params": {"rounds": rounds, "warmup_rounds": warmup, "calls_per_round": calls,
                   "observers": OBSERVERS,
                   "logging": "as kopf run: INFO, text format, to /dev/null; Kopf's default posting settings"},
    }
    report["cycle"] = {}
    for plugin_set in PLUGIN_SETS:
        report[plugin_set] = {}
        report["cycle"][plugin_set] = {}
        for kind in HANDLERS:
            for entry, where in (("handler", report[plugin_set]), ("cycle", report["cycle"][plugin_set])):
                say(f"overhead: {plugin_set}, {kind} handler, per {entry} "
                    f"({rounds} rounds x {calls[kind]} calls)")
                # Each measurement in its own task: the logging context variables stay inside it.
                where[kind] = await asyncio.create_task(_measure(
                    kind, plugin_set, rounds=rounds, calls=calls[kind], warmup=warmup, entry=entry))
    return report


def profile(kind: str = "async", plugin_set: str = "builtins_only", calls: int = 20000,
            entry: str = "handler") -> None:
    """
    Where the added time goes: the Python calls per run of stock Kopf and of ours (a run's cost
    grows with them), then cProfile of the patched path, our own functions first.
    """
    import cProfile
    import pstats

    async def profiled(side: str) -> pstats.Stats:
        subject = Subject(HANDLERS[kind])
        drain, restore = logging_as_kopf_run()
        try:
            if side == "ours":
                kopf_outcomes.install(plugins=PLUGIN_SETS[plugin_set](), entry_points=False)
            await subject.run(200, entry)
            profiler = cProfile.Profile()
            profiler.enable()
            await subject.run(calls, entry)
            profiler.disable()
        finally:
            kopf_outcomes.uninstall()
            restore()
        return pstats.Stats(profiler)

    async def main() -> None:
        found = {side: await asyncio.create_task(profiled(side)) for side in ("stock", "ours")}
        per_run = {side: sum(row[1] for row in stats.stats.values()) / calls  # type: ignore[attr-defined]
                   for side, stats in found.items()}
        unit = "run" if entry == "handler" else "cycle"
        print(f"Python calls per {kind} {unit} ({plugin_set}): stock {per_run['stock']:.1f}, "
              f"ours {per_run['ours']:.1f} (+{per_run['ours'] - per_run['stock']:.1f})")
        found["ours"].sort_stats("tottime").print_stats(r"kopf_outcomes|pluggy", 25)
        found["ours"].sort_stats("cumulative").print_stats(r"kopf_outcomes|pluggy", 25)

    asyncio.run(main())
