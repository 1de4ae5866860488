"""
Scenario 4 — scale: N deleted objects waiting at once, in one operator, and its restart.

Stock Kopf waits with ``TemporaryError(delay=3600)``; ours parks with ``Pending``. One side at
a time, in its own namespace: create N objects (concurrently, a bounded number at a time),
let the operator add its finalizers, delete them all, and wait until every deletion handler
has run and waits. After a short settling pause, the operator process is observed over an
idle window: its resident memory (``VmRSS``, and the peak ``VmHWM``, from ``/proc/<pid>/status``)
and the CPU time it uses (utime + stime from ``/proc/<pid>/stat``).

Then the operator is restarted (SIGTERM, a new process). While it is down, one more object is
created, named to be listed last; the start-up time is from the new process's start until
that object has its finalizer: the new operator has listed all N + 1 objects and caught up.
Handler runs after the restart are counted by the operator itself: a restart must not re-run
the parked (or delayed) handlers. Finally, for ours, single objects are called back one at a
time while all the others keep waiting: callback-to-gone latency.

Stock Kopf cannot be woken by a callback: its latency is the rest of its delay, so it is
reported as not measured. Its delay is an hour, so that no stock handler's delay ends within
the scenario (Kopf still wakes once every 10 minutes to touch a delayed object).
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from kubernetes_asyncio import client

from benchmarks.common import GROUP, PLURAL, VERSION, distribution, ratio, say
from benchmarks.kube import create_objects, delete_objects, scratch_namespace
from benchmarks.mirror import Mirror, has_finalizer, is_waiting
from benchmarks.process import Operator
from kopf_outcomes.client import signal

STOCK_DELAY = 3600.0
OPERATORS = {
    "stock": ("benchmarks/operators/stock_waiting.py", {"BENCH_DELAY": str(STOCK_DELAY)}),
    "ours": ("benchmarks/operators/waiting.py", {}),
}
SENTINEL = "zz-sentinel"  # after every "obj-NNNNN" in the API server's (lexical) listing order
CONCURRENCY = 48  # creations and deletions in flight at once


def phase_timeout(objects: int) -> float:
    """A bound on each phase (create, finalize, delete, wait, restart): at least 10 objects/s."""
    return 120.0 + objects / 10


async def _one(api: client.ApiClient, kubeconfig: str, side: str, *, objects: int, settle: float,
               window: float, samples: int) -> dict[str, Any]:
    path, env = OPERATORS[side]
    bound = phase_timeout(objects)
    names = [f"obj-{i:05d}" for i in range(objects)]
    async with scratch_namespace(api, f"scale-{side}") as namespace, Mirror(api, namespace) as mirror:
        async with Operator(path, namespace, kubeconfig=kubeconfig, env=env, label=f"scale-{side}") as op:
            started = time.monotonic()
            await asyncio.wait_for(create_objects(api, namespace, names, limit=CONCURRENCY), bound)
            created = time.monotonic()
            await mirror.wait_all(has_finalizer, names, timeout=bound, what="finalizers", alive=op.check_alive)
            finalized = time.monotonic()
            await asyncio.wait_for(delete_objects(api, namespace, names, limit=CONCURRENCY), bound)
            await mirror.wait_all(is_waiting, names, timeout=bound, what="every deletion to wait",
                                  alive=op.check_alive)
            waiting = time.monotonic()
            say(f"scale/{side}: {objects} objects wait ({waiting - started:.0f}s); "
                f"settling {settle:.0f}s, then idle for {window:.0f}s")
            await asyncio.sleep(settle)
            op.check_alive()
            cpu_before = op.cpu_seconds()
            await asyncio.sleep(window)
            op.check_alive()
            cpu_used = op.cpu_seconds() - cpu_before
            result: dict[str, Any] = {
                "rss_mib": op.status_kib("VmRSS") / 1024,
                "peak_rss_mib": op.status_kib("VmHWM") / 1024,
                "idle_cpu_percent": 100 * cpu_used / window,
                "idle_cpu_s": cpu_used,
                "setup_s": {"create": created - started,
                            "create_to_finalized": finalized - started,
                            "delete_to_all_waiting": waiting - finalized},
                "still_waiting": mirror.count(is_waiting, names),
            }
        say(f"scale/{side}: restarting the operator with {objects} objects waiting")
        await create_objects(api, namespace, [SENTINEL])
        async with Operator(path, namespace, kubeconfig=kubeconfig, env=env,
                            label=f"scale-{side}-restarted") as op:
            began = time.monotonic()
            await mirror.wait_all(has_finalizer, [SENTINEL], timeout=bound, alive=op.check_alive,
                                  what="the restarted operator to catch up")
            caught_up = time.monotonic()
            startup_cpu = op.cpu_seconds()
            await asyncio.sleep(settle)  # runs that a restart wrongly caused would show by now
            op.check_alive()
            result["restart"] = {
                "startup_s": caught_up - began,
                "startup_cpu_s": startup_cpu,
                "handler_runs_after_restart": op.runs(),
                "still_waiting": mirror.count(is_waiting, names),
            }
            if side == "stock":
                result["wake"] = None  # bounded only by the delay
                return result
            latencies: list[float] = []
            step = max(1, objects // samples)
            for name in names[::step][:samples]:
                sent = time.monotonic()
                await signal(api, group=GROUP, version=VERSION, plural=PLURAL, namespace=namespace,
                             name=name, status={"deletion": {"state": "done"}})
                await mirror.wait_gone([name], timeout=60, what=f"{name} to be gone",
                                       alive=op.check_alive)
                latencies.append(mirror.gone[name] - sent)
                await asyncio.sleep(0.2)
            result["wake"] = distribution(latencies)
            return result


async def run(api: client.ApiClient, kubeconfig: str, *, quick: bool, objects: int | None = None) -> dict[str, Any]:
    objects = objects or (100 if quick else 10_000)
    # Settling outlasts the HTTP client's pool: the connections of the burst of PATCHes are closed
    # 15-30 s after their last use (aiohttp's keep-alive), which a profile showed to be most of an
    # idle minute's CPU when it fell into the window.
    settle = 6.0 if quick else 45.0
    window = 10.0 if quick else 60.0
    samples = 10 if quick else 20
    report: dict[str, Any] = {
        "params": {"objects": objects, "stock_delay_s": STOCK_DELAY, "settle_s": settle,
                   "idle_window_s": window, "wake_samples": samples,
                   "phase_timeout_s": phase_timeout(objects), "concurrency": CONCURRENCY,
                   "stock_wake": "not measured: stock Kopf wakes only when its delay ends",
                   "startup": "restarted operator's start -> an object listed after all others has its finalizer"},
    }
    for side in OPERATORS:
        say(f"scale/{side}: {objects} objects")
        report[side] = await _one(api, kubeconfig, side, objects=objects, settle=settle,
                                  window=window, samples=samples)
    stock, ours = report["stock"], report["ours"]
    report["ratio"] = {
        "rss": ratio(ours["rss_mib"], stock["rss_mib"]),
        "peak_rss": ratio(ours["peak_rss_mib"], stock["peak_rss_mib"]),
        "idle_cpu": ratio(ours["idle_cpu_s"], stock["idle_cpu_s"]),
        "startup": ratio(ours["restart"]["startup_s"], stock["restart"]["startup_s"]),
        "startup_cpu": ratio(ours["restart"]["startup_cpu_s"], stock["restart"]["startup_cpu_s"]),
    }
    return report
