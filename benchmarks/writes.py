"""
Scenario 3 — API writes per waiting object, counted at the API server (its audit log).

Four operators run side by side, each in its own namespace with N deleted objects that wait
for a callback that never comes: stock Kopf polling with ``TemporaryError(delay=D)``, ours
``Pending`` parked, ours ``Pending(recheck=D)`` and ours ``Retry(delay=D)``. Once every object
of all four waits, the audit log is marked; W seconds later, the writes made by Kopf (user
agent ``kopf``) in each namespace are counted — patches of the objects and Events alike — and
so are the handler runs (as each operator records them: runs that write nothing count too).
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import Any

from kubernetes_asyncio import client

from benchmarks.common import ratio, say
from benchmarks.kube import create_objects, delete_objects, scratch_namespace
from benchmarks.mirror import Mirror, has_finalizer, is_waiting
from benchmarks.process import Operator
from kopf_outcomes_testing.cluster import ClusterInfo
from kopf_outcomes_testing.cluster.audit import AuditLog


def _variants(delay: float) -> dict[str, tuple[str, dict[str, str]]]:
    return {
        "stock": ("benchmarks/operators/stock_waiting.py", {"BENCH_DELAY": str(delay)}),
        "ours_parked": ("benchmarks/operators/waiting.py", {}),
        "ours_recheck": ("benchmarks/operators/waiting.py", {"BENCH_RECHECK": str(delay)}),
        "ours_retry": ("benchmarks/operators/waiting.py", {"BENCH_RETRY": str(delay)}),
    }


async def run(api: client.ApiClient, cluster: ClusterInfo, *, quick: bool) -> dict[str, Any]:
    objects = 10 if quick else 100
    window = 30.0 if quick else 300.0
    delay = 10.0 if quick else 60.0
    kubeconfig = str(cluster.admin_kubeconfig)
    audit = AuditLog(cluster.audit_log)
    variants = _variants(delay)
    names = [f"wait-{i:04d}" for i in range(objects)]
    report: dict[str, Any] = {
        "params": {"objects": objects, "window_s": window, "stock_delay_s": delay,
                   "recheck_s": delay, "user_agent": "kopf",
                   "counted": "every create/update/patch/delete by Kopf in the namespace"},
    }
    async with contextlib.AsyncExitStack() as stack:
        namespaces: dict[str, str] = {}
        operators: dict[str, Operator] = {}
        mirrors: dict[str, Mirror] = {}
        for variant, (path, env) in variants.items():
            label = variant.replace("_", "-")
            namespaces[variant] = ns = await stack.enter_async_context(
                scratch_namespace(api, f"writes-{label}"))
            operators[variant] = await stack.enter_async_context(
                Operator(path, ns, kubeconfig=kubeconfig, env=env, label=label))
            mirrors[variant] = await stack.enter_async_context(Mirror(api, ns))

        async def prepare(variant: str) -> None:
            ns, op, mirror = namespaces[variant], operators[variant], mirrors[variant]
            await create_objects(api, ns, names)
            await mirror.wait_all(has_finalizer, names, timeout=120, what=f"{variant}: finalizers",
                                  alive=op.check_alive)
            await delete_objects(api, ns, names)
            await mirror.wait_all(is_waiting, names, timeout=120, what=f"{variant}: waiting",
                                  alive=op.check_alive)

        await asyncio.gather(*(prepare(variant) for variant in variants))
        runs_before = {v: operators[v].runs() for v in variants}
        mark = audit.mark()
        say(f"writes: {objects} objects x {len(variants)} variants wait; counting writes for {window:.0f}s")
        for _ in range(int(window)):
            await asyncio.sleep(1)
            for op in operators.values():
                op.check_alive()
        for variant in variants:
            writes = audit.writes(since=mark, user_agent="kopf", namespace=namespaces[variant])
            kinds = collections.Counter(
                f"{w.verb} {w.resource}{'/' + w.subresource if w.subresource else ''}" for w in writes)
            runs = operators[variant].runs() - runs_before[variant]
            report[variant] = {
                "writes_total": len(writes),
                "writes_per_object": len(writes) / objects,
                "writes_by_kind": dict(sorted(kinds.items())),
                "handler_runs_per_object": runs / objects,
                "still_waiting": mirrors[variant].count(is_waiting, names),
            }
    stock = report["stock"]["writes_per_object"]
    report["ratio"] = {
        "parked": ratio(report["ours_parked"]["writes_per_object"], stock),
        "recheck": ratio(report["ours_recheck"]["writes_per_object"], stock),
        "retry": ratio(report["ours_retry"]["writes_per_object"], stock),
    }
    return report
