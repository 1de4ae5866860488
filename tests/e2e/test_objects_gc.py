"""
Parents deleted at once with their children, with Kubernetes' garbage collector: each parent's
deletion handler waits until its last child is gone. kopf-outcomes (parked on the children,
``depends_on_objects``) beside stock Kopf (polling with ``TemporaryError(delay=5)``) in one run:
the time from a parent's last child gone to the parent gone (p50, p99), the writes to parents
while they wait, the handler runs and the ERROR lines (printed; kopf-outcomes' asserted).
"""
from __future__ import annotations

import asyncio
import random
import statistics
import time

from kubernetes_asyncio import client

from kopf_outcomes_testing.cluster.audit import AuditLog
from tests.e2e.conftest import create_example, eventually, get_example
from tests.e2e.test_objects import make_children, release_child

OPERATOR = "tests/e2e/operators/children_operator.py"
PARENTS, CHILDREN = 20, 5
RELEASE_WINDOW = 6.0  # seconds over which the children's own finalizers are removed, at random


async def run_scenario(api, objects, namespace: str, operator, mode: str, audit: AuditLog) -> dict[str, float]:
    names = [f"{mode[:1]}{index}" for index in range(PARENTS)]
    async with operator(OPERATOR, MODE=mode) as op:
        children = {}
        for name in names:
            parent = await create_example(objects, namespace, name)
            children[name] = await make_children(api, namespace, parent, CHILDREN)
        for name in names:
            await eventually(lambda name=name: _finalized(objects, namespace, name), what=f"{name}'s finalizer")
        body = client.V1DeleteOptions(propagation_policy="Foreground")
        await asyncio.gather(*(objects.delete_namespaced_custom_object(
            "kopf.dev", "v1", namespace, "kopfexamples", name, body=body) for name in names))
        # The garbage collector marks the children deleted (their own finalizer holds them).
        await eventually(lambda: _all_deleting(api, namespace, children), timeout=30, what="the children deleting")
        await asyncio.sleep(2)  # every parent's handler ran once and waits
        mark = audit.mark()

        last_gone: dict[str, float] = {}
        last_gone_marks = {}
        parent_gone: dict[str, float] = {}
        schedule = sorted((random.uniform(0, RELEASE_WINDOW), parent, child)
                          for parent, kids in children.items() for child in kids)
        started = time.monotonic()

        async def release() -> None:
            remaining = {parent: len(kids) for parent, kids in children.items()}
            for at, parent, child in schedule:
                await asyncio.sleep(max(0.0, started + at - time.monotonic()))
                remaining[parent] -= 1
                if not remaining[parent]:  # from the request that removes the last child (Kopf may
                    last_gone[parent] = time.monotonic()  # see it go before the test sees the answer)
                    last_gone_marks[parent] = audit.mark()
                await release_child(api, namespace, child)

        async def watch_parents() -> None:
            while len(parent_gone) < len(names):
                for name in names:
                    if name not in parent_gone and await get_example(objects, namespace, name) is None:
                        parent_gone[name] = time.monotonic()
                await asyncio.sleep(0.05)

        await asyncio.wait_for(asyncio.gather(release(), watch_parents()), timeout=60)
        latencies = sorted(parent_gone[name] - last_gone[name] for name in names)
        # The writes to each parent from the moment all had parked until its last child was gone.
        writes = sum(len(audit.writes(since=mark, user_agent="kopf", namespace=namespace, name=name))
                     - len(audit.writes(since=last_gone_marks[name], user_agent="kopf", namespace=namespace,
                                        name=name))
                     for name in names)
        records = op.records()
        return {
            "p50": statistics.median(latencies),
            "p99": latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))],
            "writes while waiting": writes,
            "handler runs": sum(1 for r in records if r.message == "Handler 'delete_fn' is invoked."),
            "ERROR lines": sum(1 for r in records if r.level in ("ERROR", "CRITICAL")),
        }


async def test_parents_wait_parked_for_their_children_beside_stock_polling(k8s_controllers, api, cluster, objects,
                                                                           namespace, operator):
    audit = AuditLog(cluster.audit_log)
    ours = await run_scenario(api, objects, namespace, operator, "outcomes", audit)
    stock = await run_scenario(api, objects, namespace, operator, "stock", audit)
    print(f"\n{PARENTS} parents x {CHILDREN} children, foreground deletion, children released over"
          f" {RELEASE_WINDOW:.0f} s at random:")
    print(f"{'':24} {'kopf-outcomes':>14} {'stock Kopf':>12}")
    for key in ours:
        unit = " s" if key in ("p50", "p99") else ""
        label = f"last child -> parent {key}" if unit else key
        print(f"{label:24} {ours[key]:>12.2f}{unit or '  '} {stock[key]:>10.2f}{unit or '  '}")
    assert ours["writes while waiting"] == 0
    assert ours["ERROR lines"] == 0
    assert ours["p99"] < 2.0
    assert stock["ERROR lines"] > 0  # the comparison is real: stock Kopf polled, with ERROR lines


async def _finalized(objects, namespace: str, name: str) -> bool:
    body = await get_example(objects, namespace, name)
    return body is not None and any(not f.startswith("foreground") for f in body["metadata"].get("finalizers") or [])


async def _all_deleting(api, namespace: str, children: dict[str, list[str]]) -> bool:
    listing = await client.CoreV1Api(api).list_namespaced_config_map(namespace)
    deleting = {item.metadata.name for item in listing.items if item.metadata.deletion_timestamp}
    return all(child in deleting for kids in children.values() for child in kids)

