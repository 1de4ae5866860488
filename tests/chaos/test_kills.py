"""
Scenario 1: SIGKILLs at random moments (seeded) while objects are mid-deletion, some aimed at the
moment the handler calls the external system; callbacks sent while the operator is down; a
restart after each kill. The external system dedupes starts on ``recall().idempotency_key``.
"""
from __future__ import annotations

import asyncio
import random
import time

import pytest

from kopf_outcomes.memory import MEMORY_ANNOTATION
from kopf_outcomes_testing.process import OperatorProcess
from tests.chaos.external import ExternalSystem, Start
from tests.chaos.fault_proxy import FaultProxy
from tests.chaos.helpers import (
    QUICK,
    ROOT,
    create,
    delete,
    seed,
    starts_figures,
    wait_finalized,
    wait_until,
)
from tests.chaos.supervisor import Operators

OPERATOR = "tests/chaos/operators/sidefx.py"


@pytest.mark.parametrize("status_write", [False, True], ids=["", "status-write"])
async def test_sigkills_mid_deletion(status_write, objects, namespace, operator, report):
    """With ``status_write``, the README's quick start plus what an operator does first: the handler
    writes a changing value into the object's status on every run (its own write must neither
    wake it nor change its idempotency key: one start per object across the kills)."""
    report.scenario = "kills" + ("-status-write" if status_write else "") + ("-quick" if QUICK else "")
    report.seed = seed()
    rng = random.Random(report.seed)
    count, kills, aimed = (6, 3, 1) if status_write else (12, 4, 2) if QUICK else (40, 12, 5)
    names = [f"k{i}" for i in range(count)]
    report.objects = count
    system = ExternalSystem(answer_after=0.2)  # the handler is inside the call for a moment
    async with system as url:
        env = {"EXTERNAL_SYSTEM_URL": url, **({"CHAOS_STATUS_WRITE": "1"} if status_write else {})}
        ops = Operators(lambda: operator(OPERATOR, **env))
        figures = {"random_kills": 0, "aimed_kills": 0, "callbacks_while_down": 0, "callbacks_while_up": 0}

        def kill_at_the_call(start: Start) -> None:  # runs as the external system receives a start
            # The first start while the operator is up is always killed (a draw could skip them all:
            # "the chaos did not happen"); the later aimed ones by a draw.
            if figures["aimed_kills"] < aimed and ops.up and (figures["aimed_kills"] == 0 or rng.random() < 0.5):
                ops.kill()
                figures["aimed_kills"] += 1

        async def call_back_some(rate: float) -> int:
            ready = [n for n in names if system.started(n) and f"main/{n}" not in report.callbacks]
            chosen = [n for n in ready if rng.random() < rate]
            for name in chosen:
                await report.call_back(objects, namespace, name)
            return len(chosen)

        try:
            await ops.start()
            await create(objects, namespace, names)
            assert await wait_finalized(objects, namespace, names), "finalizers were not added"
            system.on_start = kill_at_the_call
            await delete(objects, namespace, names)
            deadline = time.monotonic() + (90 if QUICK else 300)
            while ops.kills < kills and time.monotonic() < deadline:
                await asyncio.sleep(rng.uniform(0.1, 2.5))
                if ops.up:
                    figures["callbacks_while_up"] += await call_back_some(0.1)
                    ops.kill()
                    figures["random_kills"] += 1
                await report.check_held(objects, namespace, names)
                figures["callbacks_while_down"] += await call_back_some(0.2)
                await asyncio.sleep(rng.uniform(0.0, 1.0))
                await ops.start()
            system.on_start = None
            if not ops.up:
                await ops.start()
            assert await wait_until(lambda: all(system.started(n) for n in names), timeout=60), "not all started"
            await report.check_held(objects, namespace, names)
            for name in names:
                if f"main/{name}" not in report.callbacks:
                    await report.call_back(objects, namespace, name)
            await report.settle(objects, namespace, names)
            ops.check()
        finally:
            ops.stop()
    report.operator_exits = ops.unexpected_exits
    report.extra.update(figures, kills=ops.kills, operator_starts=len(ops.all))
    starts_figures(report, system, names)
    report.evidence(ops, namespace)
    report.write()

    # The status-write variant's subject is the handler's own write across kills, not the callbacks.
    assert figures["aimed_kills"] >= 1 and (status_write or figures["callbacks_while_down"] >= 1), \
        "the chaos did not happen"
    assert report.early_releases == []
    assert report.stuck == []
    assert report.operator_exits == []
    assert report.extra["objects_not_started_exactly_once_by_key_main"] == []


async def delete_each_for_its_kill(objects, namespace, names, killed, ops) -> None:
    """One deletion at a time, each with the operator up, until its aimed kill (at most 30 s), the
    operator started again after it: deleted together, a second object's PATCH could land from a
    dying process, or from one still starting, and miss its kill."""
    for name in names:
        await delete(objects, namespace, [name])
        deadline = time.monotonic() + 30
        while name not in killed and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if not ops.up:
            await ops.start()


async def test_sigkills_between_the_memory_write_and_the_handlers_own_write(
        cluster, objects, namespace, report, tmp_path):
    """The status is a subresource: Kopf PATCHes the object (its progress and the memory) and then its
    status (the handler's own write, ``CHAOS_STATUS_WRITE``). A kill aimed between the two, once per
    object (through the proxy, the moment the API server applied the first): the memory is about the
    state with the own write, which never landed. The next run starts again, under the one key."""
    report.scenario, report.seed = "kills-between-memory-and-own-write" + ("-quick" if QUICK else ""), seed()
    names = [f"w{i}" for i in range(4 if QUICK else 10)]
    report.objects = len(names)
    proxy = FaultProxy(cluster.server, cluster.ca_path, random.Random(report.seed), patch_rate=0, watch_break_rate=0)
    system = ExternalSystem()
    killed: set[str] = set()
    async with system as url, proxy:
        kubeconfig = proxy.kubeconfig(tmp_path / "proxy.kubeconfig", cluster.admin_token)
        ops = Operators(lambda: OperatorProcess(ROOT / OPERATOR, namespace, kubeconfig=str(kubeconfig), cwd=ROOT,
                                                env={"EXTERNAL_SYSTEM_URL": url, "CHAOS_STATUS_WRITE": "1"}))

        def between(path: str, body: bytes) -> None:  # the object's PATCH applied; its status PATCH next
            name = path.rstrip("/").rsplit("/", 1)[-1]
            if name in names and name not in killed and MEMORY_ANNOTATION.encode() in body and ops.up:
                killed.add(name)
                ops.kill()

        try:
            await ops.start()
            await create(objects, namespace, names)
            assert await wait_finalized(objects, namespace, names), "finalizers were not added"
            proxy.on_applied = between
            await delete_each_for_its_kill(objects, namespace, names, killed, ops)
            proxy.on_applied = None
            assert await wait_until(lambda: all(system.started(n) for n in names), timeout=60), "not all started"
            await report.check_held(objects, namespace, names)
            for name in names:
                await report.call_back(objects, namespace, name)
            await report.settle(objects, namespace, names)
            ops.check()
        finally:
            ops.stop()
    report.operator_exits = ops.unexpected_exits
    report.extra.update(kills_between=len(killed), kills=ops.kills, operator_starts=len(ops.all))
    starts_figures(report, system, names)
    report.evidence(ops, namespace)
    report.write()

    assert killed == set(names), "the chaos did not happen"
    assert report.early_releases == []
    assert report.stuck == []
    assert report.operator_exits == []
    assert report.extra["objects_not_started_exactly_once_by_key_main"] == []


async def test_sigkills_between_a_successs_own_write_and_the_finalizers_removal(
        cluster, objects, namespace, report, tmp_path):
    """A deletion that starts its external process and succeeds at once, writing its status
    (``CHAOS_SUCCEED``, ``CHAOS_STATUS_WRITE``). Kopf PATCHes the object (the memory), then its status
    (the own write), then removes its finalizer (a JSON patch). A kill aimed between the status PATCH
    and the finalizer's, once per object: Kopf runs the handler again on the state with its own write,
    and its record, kept for that state, says it acted: no second start, and one key."""
    report.scenario, report.seed = "kills-between-own-write-and-release" + ("-quick" if QUICK else ""), seed()
    names = [f"s{i}" for i in range(4 if QUICK else 10)]
    report.objects = len(names)
    proxy = FaultProxy(cluster.server, cluster.ca_path, random.Random(report.seed), patch_rate=0, watch_break_rate=0)
    system = ExternalSystem()
    killed: set[str] = set()
    async with system as url, proxy:
        kubeconfig = proxy.kubeconfig(tmp_path / "proxy.kubeconfig", cluster.admin_token)
        ops = Operators(lambda: OperatorProcess(ROOT / OPERATOR, namespace, kubeconfig=str(kubeconfig), cwd=ROOT,
                                                env={"EXTERNAL_SYSTEM_URL": url, "CHAOS_STATUS_WRITE": "1",
                                                     "CHAOS_SUCCEED": "1"}))

        def after_the_status(path: str, body: bytes) -> None:  # the status PATCH applied; the finalizer's next
            *_, name, subresource = path.rstrip("/").rsplit("/", 2)
            if subresource == "status" and name in names and name not in killed and ops.up:
                killed.add(name)
                ops.kill()

        try:
            await ops.start()
            await create(objects, namespace, names)
            assert await wait_finalized(objects, namespace, names), "finalizers were not added"
            proxy.on_applied = after_the_status
            await delete_each_for_its_kill(objects, namespace, names, killed, ops)
            proxy.on_applied = None
            await report.settle(objects, namespace, names)
            ops.check()
        finally:
            ops.stop()
    report.operator_exits = ops.unexpected_exits
    report.extra.update(kills_between=len(killed), kills=ops.kills, operator_starts=len(ops.all))
    starts_figures(report, system, names)
    report.evidence(ops, namespace)
    report.write()

    assert killed == set(names), "the chaos did not happen"
    assert report.stuck == []
    assert report.operator_exits == []
    assert report.extra["objects_not_started_exactly_once_by_key_main"] == []
    assert report.extra["starts_max_raw_per_object_main"] == 1
