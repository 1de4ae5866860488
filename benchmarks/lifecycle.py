"""
Scenario 8 — lifecycle at scale: what one object costs from creation to gone (issue 31).

N objects through the seed story (Kopf issue 850): created, given the finalizer, deleted; the
deletion handler asks an external system to start and waits; the external system calls back
(a PATCH of ``status.chaos``) a fixed time after each start; the handler runs again, succeeds,
and the object is gone. The operators are the chaos suite's shards by label
(``tests/chaos/operators/``): stock Kopf polls with ``TemporaryError(delay=POLL)`` (the seed's
maintainer answer), kopf-outcomes parks with ``Pending`` and is woken by the callback. Each side
runs as one process serving every object, then as 3 shards (the objects labelled round-robin);
one side at a time, on a control plane of the benchmark's own that audits every request.

Per side, from the objects' creation to the last one gone (after a warm-up object per shard
shows that every operator watches): the operators' CPU seconds, their API requests by verb from
the audit log (user agent ``kopf/``), writes and Events among them, the wall time, each
process's peak RSS, the external starts per object, callback -> gone, and the CPU seconds of
kube-apiserver and etcd (what bounds the shards).
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio import client

from benchmarks import audit_counts
from benchmarks.common import GROUP, MERGE_PATCH, PLURAL, VERSION, distribution, ratio, say
from benchmarks.kube import api_client, create_objects, delete_objects, ensure_crd_served, scratch_namespace
from benchmarks.mirror import Mirror
from benchmarks.own_cluster import every_request_audited, servers_cpu_seconds
from benchmarks.process import Operator
from benchmarks.retries import Retries
from kopf_outcomes_testing.cluster import ClusterInfo
from kopf_outcomes_testing.cluster.audit import AuditLog
from kopf_outcomes_testing.cluster.resources import EXAMPLE_CRD
from tests.chaos.external import ExternalSystem, Start
from tests.chaos.operators.common import OPERATOR
from tests.chaos.shards import LABEL, SHARDS

SIDES = {"stock": "tests/chaos/operators/stock_shard.py", "ours": "tests/chaos/operators/shard.py"}
# The shards and who selects each shard's objects: Kopf on every event ("client": every shard
# handles every object's events), or the API server (Kopf 1.45's settings.watching.label_selectors).
LAYOUTS = {"one_process": (SHARDS[:1], "client"), "three_shards": (SHARDS, "client"),
           "three_shards_selected": (SHARDS, "server")}
USER_AGENT = "kopf/"
CONCURRENCY = 48


def _held(body: Any) -> bool:
    return bool((body.get("metadata") or {}).get("finalizers"))


class _Callbacks:
    """The external system's side: one callback per object, ``after`` seconds after its first start."""

    def __init__(self, api: client.ApiClient, namespace: str, after: float) -> None:
        self.objects, self.namespace, self.after = client.CustomObjectsApi(api), namespace, after
        self.sent: dict[str, float] = {}
        self.tasks: list[asyncio.Task[None]] = []
        self._loop = asyncio.get_running_loop()

    def on_start(self, start: Start) -> None:
        if start.name not in self.sent:
            self.sent[start.name] = 0.0  # scheduled
            self._loop.call_later(self.after, lambda: self.tasks.append(self._loop.create_task(self._send(start.name))))

    async def _send(self, name: str) -> None:
        self.sent[name] = time.monotonic()
        await self.objects.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.namespace, PLURAL, name, {"status": {"chaos": {OPERATOR: "done"}}},
            _content_type=MERGE_PATCH)  # type: ignore[call-arg]  # not in the client's stubs


async def _side(api: client.ApiClient, cluster: ClusterInfo, side: str, shards: tuple[str, ...], selection: str,
                objects: int, callback_after: float, poll: float) -> dict[str, Any]:
    names = [f"obj-{i:05d}" for i in range(objects)]
    shard_of = {name: shards[i % len(shards)] for i, name in enumerate(names)}
    shard_of.update({f"warm-{s}": s for s in shards})
    bound = 120.0 + objects / 10
    audit, system = AuditLog(cluster.audit_log), ExternalSystem()
    async with contextlib.AsyncExitStack() as stack:
        namespace = await stack.enter_async_context(scratch_namespace(api, f"life-{side}-{len(shards)}"))
        started = audit.mark()
        url = await stack.enter_async_context(system)
        callbacks = _Callbacks(api, namespace, callback_after)
        system.on_start = callbacks.on_start
        ops = [await stack.enter_async_context(Operator(
            SIDES[side], namespace, kubeconfig=cluster.admin_kubeconfig, label=f"life-{side}-{shard}",
            env={"SHARD": shard, "SELECTION": selection, "EXTERNAL_SYSTEM_URL": url, "POLL": f"{poll:g}"}))
            for shard in shards]
        mirror = await stack.enter_async_context(Mirror(api, namespace))

        def alive() -> None:
            for op in ops:
                op.check_alive()

        async def phase(what: str, step: Awaitable[None]) -> None:
            await asyncio.wait_for(step, bound)
            say(f"lifecycle/{side}/{len(shards)}: {what} ({time.monotonic() - began:.1f}s)")

        labels: Callable[[str], dict[str, str]] = lambda name: {LABEL: shard_of[name]}  # noqa: E731
        warm = [f"warm-{s}" for s in shards]  # every operator is up and watches: then the count starts
        await create_objects(api, namespace, warm, labels=labels)
        await mirror.wait_all(_held, warm, timeout=bound, what="warm-up finalizers", alive=alive)

        mark, cpu, servers, began = audit.mark(), [op.cpu_seconds() for op in ops], \
            servers_cpu_seconds(cluster), time.monotonic()
        startup = audit_counts.count(audit.writes(since=started), user_agent=USER_AGENT)
        await phase("created", create_objects(api, namespace, names, limit=CONCURRENCY, labels=labels))
        await phase("finalizers", mirror.wait_all(_held, names, timeout=bound, what="finalizers", alive=alive))
        deleted = time.monotonic()
        await phase("deleted", delete_objects(api, namespace, names, limit=CONCURRENCY))
        await mirror.wait_gone(names, timeout=bound + 10 * callback_after + objects,
                               what=f"{side}: every object to be gone", alive=alive)
        ended = time.monotonic()
        say(f"lifecycle/{side}/{len(shards)}: all gone ({ended - began:.1f}s)")
        cpu_each = [op.cpu_seconds() - before for op, before in zip(ops, cpu, strict=True)]
        cpu_s = sum(cpu_each)
        servers_s = {name: round(s - servers[name], 2) for name, s in servers_cpu_seconds(cluster).items()}
        peak_rss = [op.status_kib("VmHWM") / 1024 for op in ops]
        await asyncio.gather(*callbacks.tasks)  # a failed callback fails the scenario
        counts = audit_counts.count(audit.writes(since=mark), user_agent=USER_AGENT)
        starts = system.per_object(OPERATOR)
        return {
            "processes": len(ops),
            "startup": {"cpu_s": round(sum(cpu), 2), "requests": startup["requests"],
                        "by_kind": startup["by_kind"]},
            "cpu_s": round(cpu_s, 2),
            "cpu_ms_per_object": round(1000 * cpu_s / objects, 2),
            "cpu_s_per_process": [round(c, 2) for c in cpu_each],
            "per_object": audit_counts.per_object(counts, objects),
            "requests": counts,
            "wall_s": round(ended - began, 2),
            "delete_to_gone_s": round(ended - deleted, 2),
            "callback_to_gone": {k: v for k, v in distribution(
                [mirror.gone[n] - callbacks.sent[n] for n in names]).items() if k != "samples_s"},
            "peak_rss_mib": [round(r, 1) for r in peak_rss],
            "peak_rss_mib_sum": round(sum(peak_rss), 1),
            "starts_max_per_object": max((raw for raw, _ in (starts.get(n, (0, 0)) for n in names)), default=0),
            "keys_max_per_object": max((keys for _, keys in (starts.get(n, (0, 0)) for n in names)), default=0),
            "servers_cpu_s": servers_s,
        }


async def run(*, quick: bool, objects: int | None = None, retries: Retries | None = None) -> dict[str, Any]:
    objects = objects or (10 if quick else 1000)
    callback_after, poll = (3.0, 1.0) if quick else (15.0, 5.0)  # the seed's answer: delay=5, done at 15 s
    report: dict[str, Any] = {"params": {
        "objects": objects, "callback_after_s": callback_after, "stock_poll_s": poll, "shards": list(SHARDS),
        "operators": SIDES, "selection": {layout: selection for layout, (_, selection) in LAYOUTS.items()},
        "counted": f"requests with user agent {USER_AGENT}*, from the first creation "
                                       "to the last object gone", "audit": "every request, Metadata level"}}
    say(f"lifecycle: {objects} objects per side; callbacks {callback_after:g}s after each start; "
        f"stock polls every {poll:g}s")
    async with every_request_audited("bench-lifecycle") as cluster:
        api = await api_client(cluster.admin_kubeconfig)
        if retries is not None:
            api.retries = retries
        try:
            await ensure_crd_served(api, EXAMPLE_CRD)
            for layout, (shards, selection) in LAYOUTS.items():
                report[layout] = {}
                for side in SIDES:
                    report[layout][side] = await _side(api, cluster, side, shards, selection, objects,
                                                       callback_after, poll)
                stock, ours = report[layout]["stock"], report[layout]["ours"]
                report[layout]["ratio"] = {
                    "cpu": ratio(ours["cpu_s"], stock["cpu_s"]),
                    "requests": ratio(ours["requests"]["requests"], stock["requests"]["requests"]),
                    "writes": ratio(ours["requests"]["writes"], stock["requests"]["writes"]),
                    "wall": ratio(ours["wall_s"], stock["wall_s"])}
        finally:
            await api.close()
    report["three_over_one"] = {layout: {side: {
        "wall": ratio(report[layout][side]["wall_s"], report["one_process"][side]["wall_s"]),
        "cpu": ratio(report[layout][side]["cpu_s"], report["one_process"][side]["cpu_s"]),
        "requests": ratio(report[layout][side]["requests"]["requests"],
                          report["one_process"][side]["requests"]["requests"])} for side in SIDES}
        for layout in LAYOUTS if layout != "one_process"}
    return report
