"""
The shards scenario, for kopf-outcomes and for stock Kopf alike: three shards by label (one
process each), objects waiting mid-deletion, 10% of them relabelled to the next shard while they
wait, one shard SIGKILLed and restarted; then every callback. The figures go into ``report``.
"""
from __future__ import annotations

import asyncio
import functools
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from kopf_outcomes_testing.process import OperatorProcess
from tests.chaos.external import ExternalSystem
from tests.chaos.helpers import MERGE_PATCH, QUICK, Figures, create, delete, present, starts_figures, wait_until
from tests.chaos.supervisor import Operators

LABEL = "kopf-outcomes.example.com/shard"
SHARDS = ("a", "b", "c")
COUNT, MOVED = (30, 3) if QUICK else (1000, 100)
WRITES = ("Merge-patching the resource", "JSON-patching the resource", "Patching the resource")
PROGRESS = "kopf.zalando.org/delete_fn"  # Kopf's progress of the deletion handler
Finalizer = Callable[[str], str]  # the finalizer that holds an object on a shard


async def shards(path: Path, report: Figures, objects: client.CustomObjectsApi, namespace: str,
                 rng: random.Random, operator: Callable[..., OperatorProcess], finalizer: Finalizer,
                 selection: str = "client") -> None:
    """``selection``: who selects a shard's objects by their label, Kopf on every event ("client")
    or the API server ("server", Kopf 1.45's ``settings.watching.label_selectors``)."""
    names = [f"s{i}" for i in range(COUNT)]
    shard_of = {name: SHARDS[i % len(SHARDS)] for i, name in enumerate(names)}
    report.objects = COUNT
    system = ExternalSystem()
    async with system as url:
        ops = {shard: Operators(functools.partial(operator, str(path), SHARD=shard, SELECTION=selection,
                                                 EXTERNAL_SYSTEM_URL=url, POLL="2"))
               for shard in SHARDS}
        try:
            for supervisor in ops.values():
                await supervisor.start()
            for name in names:
                await create(objects, namespace, [name], labels={LABEL: shard_of[name]})
            assert await wait_until(lambda: _held(objects, namespace, names, shard_of, finalizer), timeout=60), \
                "finalizers were not added"
            await delete(objects, namespace, names)
            assert await wait_until(lambda: all(system.started(n) for n in names), timeout=120), "not all started"
            assert await wait_until(lambda: _concluded(objects, namespace, names), timeout=60), "not all concluded"
            waiting_since = time.time()  # every first conclusion (and stock's first retry) is stored

            moved = sorted(rng.sample(names, MOVED))
            for name in moved:  # to the next shard, as the how-to's kubectl label does
                shard_of[name] = SHARDS[(SHARDS.index(shard_of[name]) + 1) % len(SHARDS)]
                relabel = {"metadata": {"labels": {LABEL: shard_of[name]}}}
                await objects.patch_namespaced_custom_object(
                    "kopf.dev", "v1", namespace, "kopfexamples", name, relabel,
                    _content_type=MERGE_PATCH)  # type: ignore[call-arg]
            killed = rng.choice(SHARDS)
            ops[killed].kill()
            await asyncio.sleep(1)
            await ops[killed].start()
            await asyncio.sleep(3)  # the objects wait: on their new shards, on the restarted one
            for shard in SHARDS:
                await report.check_held(objects, namespace, [n for n in names if shard_of[n] == shard],
                                        finalizer=finalizer(shard))
            waiting_until = time.time()

            for name in names:
                await report.call_back(objects, namespace, name, finalizer=finalizer(shard_of[name]))
            latency = await _gone(objects, namespace, names, report.callbacks)
            await report.settle(objects, namespace, names)
            for supervisor in ops.values():
                supervisor.check()
        finally:
            for supervisor in ops.values():
                supervisor.stop()
    released = {entry.split(":")[0].split("/", 1)[1] for entry in report.early_releases}
    woken = {name: seconds for name, seconds in latency.items() if name not in released}  # gone before: no wake
    writes = [f"{shard}: {r.object}: {r.message[:160]}" for shard, supervisor in ops.items() for op in supervisor.all
              for r in op.records() if r.message.startswith(WRITES) and waiting_since <= r.time <= waiting_until]
    report.operator_exits = [code for supervisor in ops.values() for code in supervisor.unexpected_exits]
    report.extra.update(
        shards=len(SHARDS), selection=selection, moved=moved, killed_shard=killed,
        writes_while_waiting=len(writes),
        writes_while_waiting_seen=writes[:10],
        wake_after_move_s=_spread([woken[n] for n in moved if n in woken]),
        wake_after_callback_s=_spread([woken[n] for n in names if n not in moved and n in woken]),
    )
    starts_figures(report, system, names)


async def _held(objects: client.CustomObjectsApi, namespace: str, names: list[str], shard_of: dict[str, str],
                finalizer: Finalizer) -> bool:
    found = await present(objects, namespace)
    return all(finalizer(shard_of[n]) in found.get(n, []) for n in names)


async def _concluded(objects: client.CustomObjectsApi, namespace: str, names: list[str]) -> bool:
    """Whether every object has Kopf's progress of its deletion handler: its first run is stored."""
    listed = await objects.list_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples")
    stored = {item["metadata"]["name"] for item in listed["items"]
              if PROGRESS in (item["metadata"].get("annotations") or {})}
    return set(names) <= stored


async def _gone(objects: client.CustomObjectsApi, namespace: str, names: list[str],
                callbacks: dict[str, float]) -> dict[str, float]:
    """Seconds from each object's callback to the first listing without it (polled every 0.1 s)."""
    latency: dict[str, float] = {}
    deadline = time.monotonic() + (30 if QUICK else 180)
    while len(latency) < len(names) and time.monotonic() < deadline:
        found = await present(objects, namespace)
        now = time.monotonic()
        for name in names:
            if name not in found and name not in latency:
                latency[name] = round(now - callbacks[f"main/{name}"], 2)
        await asyncio.sleep(0.1)
    return latency


def _spread(values: list[float]) -> dict[str, Any]:
    return {"n": len(values), "p50": statistics.median(values) if values else None, "max": max(values, default=None)}
