"""
Scenario 2 — callback-to-gone latency, the seed story (Kopf issue 850) with N objects.

The example operators of ``examples/multistep_deletion`` run as ``kopf run``: stock Kopf polls
with ``TemporaryError(delay=10)``; ours is ``Pending`` and wakes when the object changes.
N objects are deleted at once; each deletion handler asks the simulated external system
(``ExternalSystem(delay=None)``: it never calls back by itself) to start, and waits.

When every object waits, the external system calls back, one PATCH of ``status.deletion``
per object, at moments spread uniformly over one stock polling period (seeded; the same
moments for both sides), so that stock Kopf's timers are met at every phase. The latency of
an object is from the moment its callback PATCH is sent to the moment a watch on the
namespace sees it DELETED. For ours, a burst (every callback at once) is measured as well.
"""
from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from kubernetes_asyncio import client

from benchmarks.common import GROUP, PLURAL, VERSION, distribution, percentile, ratio, say
from benchmarks.kube import create_objects, delete_objects, scratch_namespace
from benchmarks.mirror import Mirror, has_finalizer, is_waiting
from benchmarks.process import Operator
from examples.multistep_deletion.external_system import ExternalSystem
from kopf_outcomes.client import signal

STOCK_DELAY = 10.0
OPERATORS = {
    "stock": "examples/multistep_deletion/stock_example.py",
    "ours": "examples/multistep_deletion/example.py",
}


async def _one(api: client.ApiClient, kubeconfig: str, side: str, *, objects: int,
               spread: float, seed: int) -> tuple[list[float], list[float]]:
    """Latencies (seconds) of N objects for one operator; and how long each callback PATCH took."""
    label = side.replace("_", "-")
    async with scratch_namespace(api, f"latency-{label}") as namespace:
        system = ExternalSystem(kubeconfig=kubeconfig, delay=None)
        runner, url = await system.serve()
        try:
            env = {"EXTERNAL_SYSTEM_URL": url, "STOCK_POLL_DELAY": str(STOCK_DELAY)}
            path = OPERATORS["ours" if side.startswith("ours") else "stock"]
            async with Operator(path, namespace, kubeconfig=kubeconfig, env=env, label=label) as op, \
                    Mirror(api, namespace) as mirror:
                names = [f"seed-{i:04d}" for i in range(objects)]
                await create_objects(api, namespace, names)
                await mirror.wait_all(has_finalizer, names, timeout=120, what="finalizers",
                                      alive=op.check_alive)
                await delete_objects(api, namespace, names, limit=len(names))
                await mirror.wait_all(is_waiting, names, timeout=120, what="every deletion to wait",
                                      alive=op.check_alive)
                if sorted(system.starts) != sorted((namespace, n) for n in names):
                    raise RuntimeError(f"the external system was not started once per object: "
                                       f"{len(system.starts)} starts for {len(names)} objects")
                say(f"latency/{side}: {objects} objects wait; calling back over {spread:.0f}s")

                rng = random.Random(seed)
                offsets = {name: rng.uniform(0, spread) for name in names}
                sent: dict[str, float] = {}
                acked: dict[str, float] = {}
                began = time.monotonic()

                async def call_back(name: str) -> None:
                    await asyncio.sleep(max(0.0, began + offsets[name] - time.monotonic()))
                    sent[name] = time.monotonic()
                    await signal(api, group=GROUP, version=VERSION, plural=PLURAL,
                                 namespace=namespace, name=name, status={"deletion": {"state": "done"}})
                    acked[name] = time.monotonic()

                await asyncio.gather(*(call_back(name) for name in names))
                await mirror.wait_gone(names, timeout=spread + 3 * STOCK_DELAY + 60,
                                       what="every object to be gone", alive=op.check_alive)
                return ([mirror.gone[name] - sent[name] for name in names],
                        [acked[name] - sent[name] for name in names])
        finally:
            await runner.cleanup()


async def run(api: client.ApiClient, kubeconfig: str, *, quick: bool, seed: int = 850) -> dict[str, Any]:
    objects = 10 if quick else 100
    spread = STOCK_DELAY
    report: dict[str, Any] = {
        "params": {"objects": objects, "stock_poll_delay_s": STOCK_DELAY,
                   "callback_spread_s": spread, "seed": seed,
                   "measured": "callback PATCH sent -> DELETED seen by a watch"},
    }
    for side, side_spread in (("stock", spread), ("ours", spread), ("ours_burst", 0.0)):
        say(f"latency/{side}: {objects} objects")
        latencies, patches = await _one(api, kubeconfig, side, objects=objects,
                                        spread=side_spread, seed=seed)
        report[side] = distribution(latencies)
        report[side]["callback_patch_p50_s"] = percentile(patches, 50)
        report[side]["callback_patch_p99_s"] = percentile(patches, 99)
    stock, ours = report["stock"], report["ours"]
    report["ratio"] = {p: ratio(ours[f"{p}_s"], stock[f"{p}_s"]) for p in ("p50", "p95", "p99")}
    report["speedup_p50"] = ratio(stock["p50_s"], ours["p50_s"])  # stock / ours: "N times faster"
    return report
