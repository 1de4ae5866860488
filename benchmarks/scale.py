"""
Scenario 4 — scale: N deleted objects waiting at once, in one operator.

Stock Kopf waits with ``TemporaryError(delay=600)``; ours parks with ``Pending``. One side at
a time, in its own namespace: create N objects (concurrently), let the operator add its
finalizers, delete them all, and wait until every deletion handler has run and waits. After a
short settling pause, the operator process is observed over an idle window: its resident
memory (``VmRSS``, and the peak ``VmHWM``, from ``/proc/<pid>/status``) and the CPU time it
uses (utime + stime from ``/proc/<pid>/stat``). Then, for ours, single objects are called
back one at a time while all the others keep waiting: callback-to-gone latency.

Stock Kopf cannot be woken by a callback: its latency is the rest of its delay (up to 600 s),
so it is reported as not measured.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from kubernetes_asyncio import client

from benchmarks.common import (
    GROUP,
    PLURAL,
    VERSION,
    Mirror,
    Operator,
    create_objects,
    delete_objects,
    distribution,
    has_finalizer,
    is_waiting,
    ratio,
    say,
    scratch_namespace,
)
from kopf_outcomes.client import signal

STOCK_DELAY = 600.0
OPERATORS = {
    "stock": ("benchmarks/operators/stock_waiting.py", {"BENCH_DELAY": str(STOCK_DELAY)}),
    "ours": ("benchmarks/operators/waiting.py", {}),
}


async def _one(api: client.ApiClient, kubeconfig: str, side: str, *, objects: int, settle: float,
               window: float, samples: int) -> dict[str, Any]:
    path, env = OPERATORS[side]
    async with scratch_namespace(api, f"scale-{side}") as namespace:
        async with Operator(path, namespace, kubeconfig=kubeconfig, env=env, label=f"scale-{side}") as op, \
                Mirror(api, namespace) as mirror:
            names = [f"obj-{i:05d}" for i in range(objects)]
            started = time.monotonic()
            await create_objects(api, namespace, names)
            await mirror.wait_all(has_finalizer, names, timeout=900, what="finalizers",
                                  alive=op.check_alive)
            finalized = time.monotonic()
            await delete_objects(api, namespace, names)
            await mirror.wait_all(is_waiting, names, timeout=900, what="every deletion to wait",
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
                "setup_s": {"create_to_finalized": finalized - started,
                            "delete_to_all_waiting": waiting - finalized},
                "still_waiting": mirror.count(is_waiting, names),
            }
            if side == "stock":
                result["wake"] = None  # bounded only by the delay: up to 600 s
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


async def run(api: client.ApiClient, kubeconfig: str, *, quick: bool) -> dict[str, Any]:
    objects = 100 if quick else 2000
    settle = 6.0 if quick else 15.0
    window = 10.0 if quick else 60.0
    samples = 10 if quick else 20
    report: dict[str, Any] = {
        "params": {"objects": objects, "stock_delay_s": STOCK_DELAY, "settle_s": settle,
                   "idle_window_s": window, "wake_samples": samples,
                   "stock_wake": "not measured: stock Kopf wakes only when its delay ends"},
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
    }
    return report
