"""
Two replicas of the deployment recipe's operator (``examples/deploy/``) with Kopf's peering on the
real API server, under the recipe's RBAC: a replica of higher priority joins, Kopf pauses the other,
and the paused replica runs no handler (its in-memory rechecks included) and writes nothing to the
objects; when the active one leaves, the paused one resumes and rechecks on the same grid.
"""
from __future__ import annotations

import asyncio
import datetime
from pathlib import Path

from kopf_outcomes._kopf import requeue
from kopf_outcomes_testing.cluster.audit import AuditLog
from tests.e2e.conftest import eventually
from tests.e2e.replicas import (
    EXAMPLE,
    Replica,
    apply_recipe,
    install_peering_crds,
    kubectl,
    token_kubeconfig,
    writes_by,
)
from tests.e2e.test_outcomes import gone, start_deleting
from tests.e2e.test_prometheus import free_port

INVOKED = "Handler 'delete_fn' is invoked."
EVERY = 2.0  # RECHECK_SECONDS
NAMES = ["p0", "p1", "p2"]


def run_times(replica: Replica, name: str, namespace: str) -> list[float]:
    return [r.time for r in replica.records(f"{namespace}/{name}") if r.message == INVOKED]


def off_grid(times: list[float], start: float) -> list[float]:
    """How far each run is from the nearest grid point ``start + k * EVERY`` (seconds)."""
    return [round(abs((t - start) - round((t - start) / EVERY) * EVERY), 2) for t in times]


def objects_writes(writes: list[dict], after: float) -> list[str]:
    """The writes to the served objects (not to the peering object) received after ``after``."""
    return [f"{w['verb']} {w['requestURI']}" for w in writes
            if (w.get("objectRef") or {}).get("resource") == "kopfexamples" and received(w) > after]


def received(write: dict) -> float:
    return datetime.datetime.fromisoformat(write["requestReceivedTimestamp"].replace("Z", "+00:00")).timestamp()


async def test_a_preempted_replica_runs_nothing_and_writes_nothing_then_resumes_on_the_grid(
        cluster, objects, namespace, tmp_path: Path):
    install_peering_crds(cluster)
    leftovers = apply_recipe(cluster, namespace)
    audit = AuditLog(cluster.audit_log)
    mark = audit.mark()
    try:
        replicas = []
        for letter, ip in (("a", "10.0.0.1"), ("b", "10.0.0.2")):
            config, credential = token_kubeconfig(cluster, namespace, tmp_path / f"{letter}.kubeconfig")
            replicas.append(Replica(EXAMPLE, namespace, kubeconfig=config, credential=credential, pod_ip=ip,
                                    health_port=free_port(), env={"RECHECK_SECONDS": str(EVERY)}))
        low, high = replicas
        assert high.priority > low.priority
        async with low:
            for name in NAMES:
                await start_deleting(objects, namespace, name, {})
            await eventually(lambda: asyncio.sleep(0, all(len(run_times(low, n, namespace)) >= 2 for n in NAMES)),
                             timeout=15, what="rechecks on the only replica")
            starts = {n: run_times(low, n, namespace)[0] for n in NAMES}
            async with high:
                paused = (await low.wait_for(lambda r: r.message.startswith("Pausing operations in favour of"),
                                             timeout=20, what="the pause")).time
                await asyncio.sleep(EVERY * 4)
                by_low = {n: [t for t in run_times(low, n, namespace) if t > paused] for n in NAMES}
                by_high = {n: run_times(high, n, namespace) for n in NAMES}
                all_runs = {n: sorted(run_times(low, n, namespace) + by_high[n]) for n in NAMES}
                low_writes = objects_writes(writes_by(audit, mark, low.credential, namespace), paused)
                high_writes = objects_writes(writes_by(audit, mark, high.credential, namespace), paused)
            resumed = (await low.wait_for(lambda r: r.time > paused and r.message.startswith(
                "Resuming operations after the pause"), timeout=30, what="the resume")).time
            await asyncio.sleep(EVERY * 2.5)
            after_resume = {n: [t for t in run_times(low, n, namespace) if t > resumed] for n in NAMES}
            for name in NAMES:
                await objects.patch_namespaced_custom_object_status(  # the external system's callback
                    "kopf.dev", "v1", namespace, "kopfexamples", name, {"status": {"deletion": {"state": "done"}}},
                    _content_type="application/merge-patch+json")
            for name in NAMES:
                await eventually(lambda name=name: gone(objects, namespace, name), what=f"{name} to go")
            denied = [r.message for r in low.records() + high.records()
                      if "forbidden" in r.message.lower() or r.level in ("ERROR", "CRITICAL")]
    finally:
        for leftover in leftovers:
            kubectl(cluster, "delete", leftover, "--ignore-not-found")

    assert by_low == {n: [] for n in NAMES}, "the paused replica ran handlers"
    assert low_writes == [], "the paused replica wrote to the objects"
    assert high_writes == [], "rechecks write nothing"
    assert all(len(times) >= 3 for times in by_high.values()), by_high  # the active replica rechecks
    doubles = {n: [round(b - a, 2) for a, b in zip(ts, ts[1:], strict=False) if b - a < EVERY / 2]
               for n, ts in all_runs.items()}
    assert doubles == {n: [] for n in NAMES}, "a grid point run by both replicas"
    assert all(len(times) >= 1 for times in after_resume.values()), after_resume  # and the resumed one
    for name in NAMES:  # every run on the grid of the first conclusion, on either replica, within the
        # schedule's tolerance (a recheck is due from TOLERANCE before its point; each run schedules the
        # next one interval later, so a late run shifts the next ones until they are TOLERANCE late)
        assert max(off_grid(by_high[name] + after_resume[name], starts[name])) <= requeue.TOLERANCE + 0.05, name
    assert denied == []
