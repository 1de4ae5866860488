"""
Scenario 6 — deletions through cleanup Jobs, the shape of a real operator (issue 29).

N parents are deleted; each one's deletion waits for its cleanup Job, found by the label
``example.com/cluster=<parent's name>`` (no ownerReferences). The Jobs are plain objects (no Job
controller runs here): a fake runner, a task of this benchmark, moves each one through
active -> succeeded by patching its status, one failing first, at moments spread over one stock
polling period (quick) or two (full: Jobs that run up to 42 s), one in each 1/N of it; seeded,
the same for every side. The handlers write ``status.phase`` and a timestamp with their own API client when the
phase changes.

Sides, side by side: stock Kopf polling with ``TemporaryError(delay=20)``; kopf-outcomes with
``Pending`` and ``depends_on_objects(selected(... "{metadata.name}"))``, its own writes left out
of its state (``ignore=``); and the same without ``ignore=`` (what the hint is about). Then the
port's shape, stock and ours: the handler creates its own Job when its parent is deleted and writes
its status on every run (issue 43, finding 6: its own creation wakes it once more).

Figures: Job done (its succeeded PATCH sent) -> parent gone (DELETED seen by a watch), handler
runs, writes to the parents (Kopf's and the handler's own, from the audit log), Events, ERROR
lines in the operator's log, and the operator's CPU seconds from the deletions to the last gone.
The Events are kopf-outcomes' own, one per stored conclusion (``events.py``); Kopf >= 1.38 posts
no log line as an Event unless ``settings.posting.loggers`` is set, so stock posts none here.
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import re
import time
from typing import Any

from kubernetes_asyncio import client

from benchmarks.common import distribution, ratio, say
from benchmarks.kube import create_objects, delete_objects, scratch_namespace
from benchmarks.mirror import Mirror, has_finalizer, is_waiting
from benchmarks.operators.cleanup_jobs import LABEL, USER_AGENT
from benchmarks.process import Operator
from kopf_outcomes_testing.cluster import ClusterInfo
from kopf_outcomes_testing.cluster.audit import AuditLog

STOCK_DELAY = 20.0
JOBS_SEEN = 2.0
SIDES = {
    "stock": ("benchmarks/operators/stock_jobs.py", {"BENCH_DELAY": str(STOCK_DELAY)}),
    "ours": ("benchmarks/operators/jobs.py", {}),
    "ours_without_ignore": ("benchmarks/operators/jobs.py", {"BENCH_NO_IGNORE": "1"}),
    # The port's shape (issue 43, finding 6): the handler creates its own Job and writes its status on every run.
    "stock_creates_job": ("benchmarks/operators/stock_jobs.py", {"BENCH_DELAY": str(STOCK_DELAY),
                                                                 "BENCH_CREATES_JOB": "1"}),
    "ours_creates_job": ("benchmarks/operators/jobs.py", {"BENCH_CREATES_JOB": "1"}),
}
_ERROR = re.compile(r"\[ERROR\s*\]|\[CRITICAL\s*\]")
_HINT = "concluded as before each time"


def _job(parent: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": f"{parent}-cleanup", "labels": {LABEL: parent}},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "cleanup", "image": "busybox", "command": ["true"]}]}}}}


async def _status(batch: client.BatchV1Api, namespace: str, parent: str, status: dict[str, Any]) -> None:
    await batch.patch_namespaced_job_status(f"{parent}-cleanup", namespace, {"status": status},
                                            _content_type="application/merge-patch+json")


async def _runner(api: client.ApiClient, namespace: str, offsets: dict[str, float],
                  failing: str) -> dict[str, float]:
    """The fake Job runner: active at once, succeeded at its offset (``failing``: failed at half
    of it, then active again); returns when each Job's succeeded PATCH was sent."""
    batch, began, done = client.BatchV1Api(api), time.monotonic(), {}
    started = {"startTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    async def run(parent: str) -> None:
        await _status(batch, namespace, parent, {**started, "active": 1})
        if parent == failing:
            await asyncio.sleep(max(0.0, began + offsets[parent] / 2 - time.monotonic()))
            await _status(batch, namespace, parent, {"active": 1, "failed": 1})
        await asyncio.sleep(max(0.0, began + offsets[parent] - time.monotonic()))
        done[parent] = time.monotonic()
        await _status(batch, namespace, parent, {"active": 0, "succeeded": 1})

    await asyncio.gather(*(run(parent) for parent in offsets))
    return done


class _Together:
    """The sides' runners start together, once every side's parents wait (asyncio.Barrier is 3.11+)."""

    def __init__(self, parties: int) -> None:
        self.parties, self.arrived, self.event = parties, 0, asyncio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived >= self.parties:
            self.event.set()
        await self.event.wait()


async def _side(api: client.ApiClient, cluster: ClusterInfo, side: str, names: list[str],
                offsets: dict[str, float], prepared: _Together) -> dict[str, Any]:
    path, env = SIDES[side]
    label = side.replace("_", "-")
    audit = AuditLog(cluster.audit_log)
    async with contextlib.AsyncExitStack() as stack:
        namespace = await stack.enter_async_context(scratch_namespace(api, f"jobs-{label}"))
        op = await stack.enter_async_context(Operator(path, namespace, kubeconfig=cluster.admin_kubeconfig,
                                                      env=env, label=label))
        mirror = await stack.enter_async_context(Mirror(api, namespace))
        await create_objects(api, namespace, names)
        await mirror.wait_all(has_finalizer, names, timeout=120, what=f"{side}: finalizers", alive=op.check_alive)
        batch = client.BatchV1Api(api)
        creates = "BENCH_CREATES_JOB" in env
        if not creates:
            await asyncio.gather(*(batch.create_namespaced_job(namespace, _job(name)) for name in names))
            # The Jobs exist well before their parents are deleted, as in the real shape: the operators'
            # watches have seen them (else a parent may first conclude "no cleanup job yet": one more run).
            await asyncio.sleep(JOBS_SEEN)
        mark, cpu = audit.mark(), op.cpu_seconds()
        await delete_objects(api, namespace, names)
        await mirror.wait_all(is_waiting, names, timeout=120, what=f"{side}: waiting", alive=op.check_alive)
        while creates and len((await batch.list_namespaced_job(namespace)).items) < len(names):
            await asyncio.sleep(0.2)  # the handlers create them: the runner moves them once they exist
        await prepared.wait()  # every side waits: the runners start together
        done = await _runner(api, namespace, offsets, failing=names[0])
        await mirror.wait_gone(names, timeout=max(offsets.values()) + 3 * STOCK_DELAY + 30,
                               what=f"{side}: every parent to be gone", alive=op.check_alive)
        cpu = op.cpu_seconds() - cpu
        writes = [w for w in audit.writes(since=mark, namespace=namespace)
                  if w.user_agent.startswith(("kopf", USER_AGENT))]
        parents = [w for w in writes if w.resource == "kopfexamples"]
        log = op.log_tail(10_000_000)
        return {
            **{f"gone_{key}": value for key, value in
               distribution([mirror.gone[name] - done[name] for name in names]).items()},
            "handler_runs": op.runs(),
            "writes_to_parents_kopf": sum(w.user_agent.startswith("kopf") for w in parents),
            "writes_to_parents_handler": sum(w.user_agent.startswith(USER_AGENT) for w in parents),
            "events": sum(w.resource == "events" and w.user_agent.startswith("kopf") for w in writes),
            "error_lines": sum(bool(_ERROR.search(line)) for line in log.splitlines()),
            "hints": log.count(_HINT),
            "cpu_s": round(cpu, 3),
            "writes_by_kind": dict(sorted(collections.Counter(
                f"{w.user_agent.split('/')[0]} {w.verb} {w.resource}{'/' + w.subresource if w.subresource else ''}"
                for w in writes).items())),
        }


async def run(api: client.ApiClient, cluster: ClusterInfo, *, quick: bool, seed: int = 29) -> dict[str, Any]:
    parents = 4 if quick else 8
    names = [f"cluster-{i:02d}" for i in range(parents)]
    spread = STOCK_DELAY * (1 if quick else 2)
    # Stratified: one Job done in each 1/N of the spread, at a seeded moment within it, the strata
    # dealt to the parents in a seeded order: stock's polls are met at every phase, as in a long run.
    rng = random.Random(seed)
    strata = rng.sample(range(parents), parents)
    offsets = {name: 2.0 + spread * (stratum + rng.random()) / parents for name, stratum in zip(names, strata,
                                                                                                strict=True)}
    report: dict[str, Any] = {"params": {
        "parents": parents, "stock_delay_s": STOCK_DELAY, "seed": seed, "failing_first": 1,
        "measured": "the Job's succeeded PATCH sent -> the parent's DELETED seen by a watch",
        "job_done_spread_s": [2.0, 2.0 + spread]}}
    say(f"jobs: {parents} parents per side, {len(SIDES)} sides; Jobs done over {spread:.0f}s")
    prepared = _Together(len(SIDES))
    results = await asyncio.gather(*(_side(api, cluster, side, names, offsets, prepared) for side in SIDES))
    report.update(zip(SIDES, results, strict=True))
    stock, ours = report["stock"], report["ours"]
    report["speedup_p50"] = ratio(stock["gone_p50_s"], ours["gone_p50_s"])
    report["speedup_p99"] = ratio(stock["gone_p99_s"], ours["gone_p99_s"])
    return report
