"""
The scale-out scenario (three replicas of one operator with Kopf's peering, run as the deployment
recipe runs them) and its figures, for kopf-outcomes and for stock Kopf alike.

1. ``mid`` (active) and ``low`` (paused) run; objects are deleted and wait for their callbacks.
2. ``mid`` is SIGKILLed mid-wait: ``low`` takes over once the dead peer's entry expires.
3. ``high`` joins: Kopf pauses ``low`` (preemption); ``high`` goes on.
4. Every object is called back, and must go.

A replica is active from each "Resuming operations after the pause" in its log to the next
"Pausing operations in favour of ..." (or its end); runs and writes outside are a paused replica's.
"""
from __future__ import annotations

import asyncio
import random
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from kopf_outcomes_testing.cluster import ClusterInfo
from kopf_outcomes_testing.cluster.audit import AuditLog
from tests.chaos.external import ExternalSystem
from tests.chaos.helpers import QUICK, Figures, create, delete, starts_figures, wait_finalized, wait_until
from tests.e2e.replicas import Replica, apply_recipe, install_peering_crds, kubectl, token_kubeconfig, writes_by
from tests.e2e.test_peering import received
from tests.e2e.test_prometheus import free_port

INVOKED = "Handler 'delete_fn' is invoked."
EVERY = 2.0  # seconds between rechecks (or stock Kopf's retries)
LIFETIME = 5  # Kopf's peering lifetime, seconds: a dead peer is noticed after it
COUNT = 6 if QUICK else 20
OBSERVE = EVERY * (4 if QUICK else 10)  # seconds watched after the takeover and after the preemption
IPS = {"low": "10.0.0.1", "mid": "10.0.0.2", "high": "10.0.0.3"}  # priorities from the pods' IPs


def active_intervals(replica: Replica, ended: float) -> list[tuple[float, float]]:
    intervals, since = [], None
    for record in replica.records():
        if record.message.startswith("Resuming operations after the pause") and since is None:
            since = record.time
        elif record.message.startswith("Pausing operations in favour of") and since is not None:
            intervals.append((since, record.time))
            since = None
    return [*intervals, (since, ended)] if since is not None else intervals


def outside(moment: float, intervals: list[tuple[float, float]]) -> bool:
    return not any(start <= moment <= end for start, end in intervals)


async def scale_out(path: Path, report: Figures, cluster: ClusterInfo, objects: Any, namespace: str,
                    tmp_path: Path, rng: random.Random) -> None:
    """Run the scenario with the operator file ``path``; its figures go into ``report.extra``."""
    install_peering_crds(cluster)
    leftovers = apply_recipe(cluster, namespace)
    audit = AuditLog(cluster.audit_log)
    mark = audit.mark()
    names = [f"s{i}" for i in range(COUNT)]
    report.objects = COUNT
    ended: dict[str, float] = {}
    moments: dict[str, float] = {}
    called: dict[str, float] = {}
    system = ExternalSystem()
    async with system as url:
        env = {"EXTERNAL_SYSTEM_URL": url, "CHAOS_RECHECK": str(EVERY), "PEERING_LIFETIME": str(LIFETIME)}
        replicas: dict[str, Replica] = {}
        metrics = {letter: free_port() for letter in IPS}  # the Prometheus plugin's, where it is loaded
        for letter, ip in IPS.items():
            config, credential = token_kubeconfig(cluster, namespace, tmp_path / f"{letter}.kubeconfig")
            replicas[letter] = Replica(path, namespace, kubeconfig=config, credential=credential, pod_ip=ip,
                                       health_port=free_port(), env={
                                           **env, "KOPF_OUTCOMES_PLUGINS": "prometheus",
                                           "KOPF_OUTCOMES_PROMETHEUS_ADDRESS": f"127.0.0.1:{metrics[letter]}"})
        low, mid, high = replicas["low"], replicas["mid"], replicas["high"]
        try:
            await mid.start()
            await mid.wait_for(lambda r: r.message.startswith("Resuming operations"), what="mid to be active")
            await low.start()
            await create(objects, namespace, names)
            assert await wait_finalized(objects, namespace, names), "finalizers were not added"
            await delete(objects, namespace, names)
            assert await wait_until(lambda: all(runs_of(mid, namespace, n) >= 2 for n in names), timeout=30), \
                "the objects did not wait"
            moments["waiting"] = time.time()
            await asyncio.sleep(rng.uniform(0, EVERY))  # SIGKILL mid-wait, anywhere between two rechecks
            moments["killed"] = ended["mid"] = time.time()
            mid.kill()
            resumed = await low.wait_for(lambda r: r.time > moments["killed"] and r.message.startswith(
                "Resuming operations after the pause"), timeout=LIFETIME * 4, what="the takeover")
            moments["took_over"] = resumed.time
            await asyncio.sleep(OBSERVE)
            moments["joined"] = time.time()
            await high.start()
            paused = await low.wait_for(lambda r: r.time > moments["joined"] and r.message.startswith(
                "Pausing operations in favour of"), timeout=30, what="the preemption")
            moments["preempted"] = paused.time
            await asyncio.sleep(OBSERVE)
            moments["callbacks"] = time.time()
            await report.check_held(objects, namespace, names)
            for name in names:
                called[name] = time.time()
                await report.call_back(objects, namespace, name)
            await report.settle(objects, namespace, names)
            report.extra["waiting_gauge_after_release"] = {  # all released by high, low paused
                letter: await waiting(metrics[letter]) for letter in ("low", "high")}
        finally:
            for letter, replica in replicas.items():
                ended.setdefault(letter, time.time())
                replica.stop()
            for leftover in leftovers:
                kubectl(cluster, "delete", leftover, "--ignore-not-found")
    report.extra.update(figures(replicas, ended, moments, called, audit, mark, namespace, names))
    starts_figures(report, system, names)


async def waiting(port: int) -> float | None:
    """The plugin's pending handlers, as one replica exports them now (None without the plugin)."""
    def get() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return str(response.read().decode())
    try:
        text = await asyncio.to_thread(get)
    except OSError:
        return None
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == "kopf_outcomes_handlers_waiting" and s.labels.get("state") == "pending")


def runs_of(replica: Replica, namespace: str, name: str) -> int:
    return sum(1 for r in replica.records(f"{namespace}/{name}") if r.message == INVOKED)


def figures(replicas: dict[str, Replica], ended: dict[str, float], moments: dict[str, float],
            called: dict[str, float], audit: AuditLog, mark: Any, namespace: str, names: list[str]) -> dict[str, Any]:
    active = {letter: active_intervals(r, ended[letter]) for letter, r in replicas.items()}
    runs = [(letter, r.object.split("/", 1)[1], r.time) for letter, replica in replicas.items()
            for r in replica.records() if r.message == INVOKED and r.object is not None]
    by_paused = [f"{letter} {name} +{t - moments['waiting']:.2f}s" for letter, name, t in runs
                 if outside(t, active[letter])]
    doubles = []  # two runs of one object closer than half an interval, before its callback
    for name in names:
        times = sorted((t, letter) for letter, n, t in runs if n == name and t < called.get(name, float("inf")))
        doubles += [f"{name}: {a[1]}@{a[0] - moments['waiting']:.2f}s {b[1]}@{b[0] - moments['waiting']:.2f}s"
                    for a, b in zip(times, times[1:], strict=False) if b[0] - a[0] < EVERY / 2]
    writes = {letter: [w for w in writes_by(audit, mark, r.credential, namespace)
                       if (w.get("objectRef") or {}).get("resource") == "kopfexamples"]
              for letter, r in replicas.items()}
    while_waiting = sum(1 for ws in writes.values() for w in ws
                        if moments["waiting"] < received(w) < moments["callbacks"])
    paused_writes = [f"{letter} {w['verb']} {(w.get('objectRef') or {}).get('name')}"
                     for letter, ws in writes.items() for w in ws if outside(received(w), active[letter])]
    return {
        "takeover_s": round(moments["took_over"] - moments["killed"], 2),
        "takeover_bound_s": LIFETIME + 2,
        "preemption_pause_s": round(moments["preempted"] - moments["joined"], 2),
        "runs_total": len(runs),
        "runs_by_paused_replicas": by_paused,
        "double_runs": doubles,
        "writes_while_waiting": while_waiting,
        "writes_by_paused_replicas": paused_writes,
        "active_intervals": {k: [(round(a - moments["waiting"], 2), round(b - moments["waiting"], 2))
                                 for a, b in v] for k, v in active.items()},
        "log_faults": {k: r.text().count("Traceback") for k, r in replicas.items()},
    }
