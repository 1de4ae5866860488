"""
Scenario 5 — the scale curve: an operator's memory at each number of waiting objects.

Most operators serve tens to hundreds of objects, in a pod with a memory limit: what each
waiting object costs matters at every size, not only at the 10,000 of :mod:`.scale`. Stock Kopf
(``TemporaryError(delay=3600)``) and ours (``Pending``) run at the same time, each in its own
namespace, so that the shared machine's load falls on both alike. Each operator serves a growing
set of deleted, waiting objects: at each size (0, 10, 100, 1,000, 10,000; the quick run stops at
100), the objects added since the last size are created, given their finalizers, deleted, and
waited for; after a settling pause (in which the HTTP client closes the connections of the burst)
the resident memory of each process is read (``VmRSS``) and its peak so far (``VmHWM``).
"""
from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from kubernetes_asyncio import client

from benchmarks.common import ratio, say
from benchmarks.kube import create_objects, delete_objects, scratch_namespace
from benchmarks.mirror import Mirror, has_finalizer, is_waiting
from benchmarks.process import Operator
from benchmarks.scale import CONCURRENCY, OPERATORS, phase_timeout

SIZES = (0, 10, 100, 1_000, 10_000)
QUICK_SIZES = SIZES[:3]


async def _grow(api: client.ApiClient, namespace: str, mirror: Mirror, op: Operator, names: Sequence[str]) -> None:
    """The named objects, created, finalized by the operator, deleted, and waiting."""
    bound = phase_timeout(len(names))
    await asyncio.wait_for(create_objects(api, namespace, names, limit=CONCURRENCY // 2), bound)
    await mirror.wait_all(has_finalizer, names, timeout=bound, what="finalizers", alive=op.check_alive)
    await asyncio.wait_for(delete_objects(api, namespace, names, limit=CONCURRENCY // 2), bound)
    await mirror.wait_all(is_waiting, names, timeout=bound, what="every deletion to wait", alive=op.check_alive)


def _sample(op: Operator) -> dict[str, float]:
    op.check_alive()
    return {"rss_mib": op.status_kib("VmRSS") / 1024, "peak_rss_mib": op.status_kib("VmHWM") / 1024}


async def run(api: client.ApiClient, kubeconfig: str, *, quick: bool,
              sizes: Sequence[int] | None = None, settle: float | None = None) -> dict[str, Any]:
    sizes = sorted(set(sizes if sizes is not None else QUICK_SIZES if quick else SIZES))
    settle = settle if settle is not None else 12.0 if quick else 30.0
    report: dict[str, Any] = {
        "params": {"sizes": sizes, "settle_s": settle, "stock_delay_s": OPERATORS["stock"][1]["BENCH_DELAY"],
                   "sides": "both operators at once, each in its own namespace"},
        "points": [],
    }
    async with (scratch_namespace(api, "curve-stock") as stock_ns, scratch_namespace(api, "curve-ours") as ours_ns,
                Mirror(api, stock_ns) as stock_mirror, Mirror(api, ours_ns) as ours_mirror):
        namespaces = {"stock": (stock_ns, stock_mirror), "ours": (ours_ns, ours_mirror)}
        operators = {side: Operator(OPERATORS[side][0], namespaces[side][0], kubeconfig=kubeconfig,
                                    env=OPERATORS[side][1], label=f"curve-{side}") for side in namespaces}
        async with operators["stock"], operators["ours"]:
            done = 0
            for size in sizes:
                names = [f"obj-{i:05d}" for i in range(done, size)]
                if names:
                    say(f"curve: {size} objects waiting in each operator ({len(names)} more)")
                    await asyncio.gather(*(_grow(api, namespaces[side][0], namespaces[side][1], operators[side], names)
                                           for side in operators))
                done = size
                await asyncio.sleep(settle)
                point: dict[str, Any] = {"objects": size}
                point.update({side: _sample(op) for side, op in operators.items()})
                point["ratio"] = {key: ratio(point["ours"][key], point["stock"][key])
                                  for key in ("rss_mib", "peak_rss_mib")}
                say(f"curve: {size} objects: RSS stock {point['stock']['rss_mib']:.1f} MiB, "
                    f"ours {point['ours']['rss_mib']:.1f} MiB ({point['ratio']['rss_mib']:.3f}x)")
                report["points"].append(point)
    report["per_object_kib"] = per_object(report["points"])
    return report


def per_object(points: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """What each waiting object costs, by side: the RSS grown from the smallest size to the largest,
    per object added."""
    if len(points) < 2 or points[-1]["objects"] == points[0]["objects"]:
        return {"stock": None, "ours": None}
    first, last = points[0], points[-1]
    added = last["objects"] - first["objects"]
    return {side: (last[side]["rss_mib"] - first[side]["rss_mib"]) * 1024 / added for side in ("stock", "ours")}
