"""
Scenario 9 — wake-ups at scale (issue 43): N parents that wait for their children, found by a
per-parent label, while the children change and move.

Per side, in its own namespace, one side after the other: N parents (kopfexamples) and K
children each (ConfigMaps labelled ``example.com/parent=<parent>``, ``data.state: running``; one
in five labelled ``example.com/waits=yes``, with a waiting handler of its own: a recheck a minute
away, or stock's ``TemporaryError(delay=60)``). The parents are deleted and wait. Then each
parent's children are set ``done`` at a seeded moment of a window (the same for both sides);
for a tenth of the parents, one child is moved to a parent that is not deleted instead, after
its siblings are done: its leaving is what frees its old parent. A parent is ready when its last
child is done or gone from it (the API server's answer to that PATCH).

Figures: ready -> parent gone (DELETED seen by a watch), p50/p99/max; lost wake-ups (a parent
gone later than the bound after it was ready: ours 5 s, stock its delay + 5 s); handler runs, and
those beyond two per parent (the first and the last): needless wake-ups; the operator's RSS and
CPU from the deletions to the last gone; the time from the operator's start until every parent
has its finalizer (Kopf listed both resources). LISTs: stock's handler lists on every poll; ours
lists nothing per wake-up or recheck (``tests/e2e/test_recheck_requests.py`` counts them).
"""
from __future__ import annotations

import asyncio
import contextlib
import random
import time
from typing import Any

from kubernetes_asyncio import client

from benchmarks.common import MERGE_PATCH, distribution, ratio, say
from benchmarks.kube import bounded, create_objects, delete_objects, scratch_namespace
from benchmarks.mirror import Mirror, has_finalizer, is_waiting
from benchmarks.process import Operator
from kopf_outcomes_testing.cluster import ClusterInfo

STOCK_DELAY = 5.0
PARENT, WAITS = "example.com/parent", "example.com/waits"
SIDES = {
    "stock": ("benchmarks/operators/stock_wakeups.py", {"BENCH_DELAY": str(STOCK_DELAY)}),
    "ours": ("benchmarks/operators/wakeups.py", {}),
}
BOUND = {"stock": STOCK_DELAY + 5.0, "ours": 5.0}
KEEPERS = 2  # parents that are not deleted: the moved children go to them
CONCURRENCY = 32


def _plan(parents: list[str], window: float, seed: int) -> tuple[dict[str, float], set[str]]:
    """When each parent's children are done (seconds into the window), and whose one child moves."""
    rng = random.Random(seed)
    return ({name: rng.uniform(0.0, window) for name in parents},
            set(rng.sample(parents, max(1, len(parents) // 10))))


async def _side(api: client.ApiClient, cluster: ClusterInfo, side: str, parents: list[str], per_parent: int,
                plan: dict[str, float], moved: set[str]) -> dict[str, Any]:
    path, env = SIDES[side]
    core = client.CoreV1Api(api)
    keepers = [f"keep-{i}" for i in range(KEEPERS)]
    children = {parent: [f"{parent}-c{k}" for k in range(per_parent)] for parent in parents}
    async with contextlib.AsyncExitStack() as stack:
        namespace = await stack.enter_async_context(scratch_namespace(api, f"wakeups-{side}"))
        mirror = await stack.enter_async_context(Mirror(api, namespace))
        await create_objects(api, namespace, [*parents, *keepers], limit=CONCURRENCY)

        async def create_child(item: tuple[str, int]) -> None:
            parent, k = item
            labels = {PARENT: parent, **({WAITS: "yes"} if k % 5 == 0 else {})}
            await core.create_namespaced_config_map(namespace, {
                "metadata": {"name": f"{parent}-c{k}", "labels": labels}, "data": {"state": "running"}})
        await bounded([(parent, k) for parent in parents for k in range(per_parent)], create_child,
                      limit=CONCURRENCY)
        started = time.monotonic()
        op = await stack.enter_async_context(Operator(path, namespace, kubeconfig=cluster.admin_kubeconfig,
                                                      env=env, label=f"wakeups-{side}"))
        bound = 120.0 + len(parents) * per_parent / 20
        await mirror.wait_all(has_finalizer, [*parents, *keepers], timeout=bound, what=f"{side}: finalizers",
                              alive=op.check_alive)
        listed = time.monotonic() - started
        cpu, runs_before = op.cpu_seconds(), op.runs()
        await delete_objects(api, namespace, parents, limit=CONCURRENCY)
        await mirror.wait_all(is_waiting, parents, timeout=bound, what=f"{side}: waiting", alive=op.check_alive)
        runs_waiting = op.runs() - runs_before
        began, ready = time.monotonic(), {}

        async def finish(parent: str) -> None:
            await asyncio.sleep(plan[parent])
            names = children[parent]
            last = names[-1] if parent in moved else None
            await asyncio.gather(*(core.patch_namespaced_config_map(name, namespace, {"data": {"state": "done"}},
                                                                    _content_type=MERGE_PATCH)
                                   for name in names if name != last))
            if last is not None:  # it leaves: its old parent is free, and only its leaving says so
                await core.patch_namespaced_config_map(last, namespace, {"metadata": {"labels": {
                    PARENT: keepers[int(parent[2:]) % KEEPERS]}}}, _content_type=MERGE_PATCH)
            ready[parent] = time.monotonic()
        await asyncio.gather(*(finish(parent) for parent in parents))
        await mirror.wait_gone(parents, timeout=bound + BOUND[side], what=f"{side}: every parent to be gone",
                               alive=op.check_alive)
        latencies = [mirror.gone[parent] - ready[parent] for parent in parents]
        runs = op.runs() - runs_before
        return {
            **{f"wake_{key}": value for key, value in distribution(latencies).items()},
            "lost_wakeups": sum(latency > BOUND[side] for latency in latencies),
            "handler_runs": runs,
            "handler_runs_before_the_changes": runs_waiting,
            "needless_runs": max(0, runs - 2 * len(parents)),
            "rss_mib": op.status_kib("VmRSS") / 1024,
            "peak_rss_mib": op.status_kib("VmHWM") / 1024,
            "cpu_s": round(op.cpu_seconds() - cpu, 3),
            "start_to_listed_s": listed,
            "changes_s": time.monotonic() - began,
        }


async def run(api: client.ApiClient, cluster: ClusterInfo, *, quick: bool, parents: int | None = None,
              seed: int = 43) -> dict[str, Any]:
    count = parents or (10 if quick else 1000)
    per_parent = 5 if quick else 10
    window = 8.0 if quick else 30.0
    names = [f"p-{i:05d}" for i in range(count)]
    plan, moved = _plan(names, window, seed)
    report: dict[str, Any] = {"params": {
        "parents": count, "children_per_parent": per_parent, "children": count * per_parent,
        "moved_children": len(moved), "children_waiting_on_their_own": count * ((per_parent + 4) // 5),
        "window_s": window, "stock_delay_s": STOCK_DELAY, "lost_bound_s": BOUND, "seed": seed,
        "measured": "the last child's PATCH answered (done, or moved away) -> the parent's DELETED seen"}}
    for side in SIDES:
        say(f"wakeups/{side}: {count} parents, {count * per_parent} children")
        report[side] = await _side(api, cluster, side, names, per_parent, plan, moved)
    stock, ours = report["stock"], report["ours"]
    report["ratio"] = {"wake_p50": ratio(ours["wake_p50_s"], stock["wake_p50_s"]),
                       "wake_p99": ratio(ours["wake_p99_s"], stock["wake_p99_s"]),
                       "rss": ratio(ours["rss_mib"], stock["rss_mib"]),
                       "cpu": ratio(ours["cpu_s"], stock["cpu_s"]),
                       "runs": ratio(ours["handler_runs"], stock["handler_runs"])}
    return report
