"""Pending(recheck=...) on the real API server: runs on time from the operator's memory, writes nothing."""
from __future__ import annotations

import asyncio

from kopf_outcomes_testing.cluster.audit import AuditLog
from tests.e2e.conftest import eventually
from tests.e2e.test_memory import patch
from tests.e2e.test_outcomes import OPERATOR, finalized, runs, start_deleting

INVOKED = "Handler 'delete_fn' is invoked."


def run_times(op) -> list[float]:
    return [r.time for r in op.records() if r.message == INVOKED]


async def test_a_recheck_runs_on_time_and_writes_nothing_between_unchanged_runs(cluster, objects, namespace, operator):
    audit = AuditLog(cluster.audit_log)
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "r", {"onDelete": "pending-recheck"})  # every second
        await eventually(lambda: asyncio.sleep(0, runs(op) >= 2), timeout=10, what="a second run")
        mark, before = audit.mark(), runs(op)
        await asyncio.sleep(4)
        assert runs(op) - before >= 3  # on time: about one run a second
        assert audit.writes(since=mark, user_agent="kopf", namespace=namespace, name="r") == []
        gaps = [later - earlier for earlier, later in zip(run_times(op)[1:], run_times(op)[2:], strict=False)]
        assert gaps and all(0.5 <= gap <= 2.0 for gap in gaps), gaps
        assert await finalized(objects, namespace, "r")
        assert not [r for r in op.records(f"{namespace}/r") if r.level in ("WARNING", "ERROR")]


async def test_a_change_of_state_wakes_a_rechecking_handler_at_once(objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "c", {"onDelete": "pending-recheck-slow"})  # every 8 s
        await op.wait_for(lambda r: r.message == INVOKED, what="the first run")
        await asyncio.sleep(0.5)
        first = run_times(op)[0]
        await patch(objects, namespace, "c", {"metadata": {"labels": {"changed": "yes"}}})
        await eventually(lambda: asyncio.sleep(0, runs(op) == 2), timeout=4, what="the change to wake it")
        assert run_times(op)[1] - first < 4


async def test_after_a_sigkill_during_the_wait_the_recheck_runs_at_its_deadline(objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "k", {"onDelete": "pending-recheck-slow"})  # every 8 s
        await op.wait_for(lambda r: r.message == INVOKED, what="the first run")
        first = run_times(op)[0]
        await asyncio.sleep(1)
        op.kill()
    async with operator(OPERATOR) as again:  # restarted well before the deadline (first + 8 s)
        await eventually(lambda: asyncio.sleep(0, runs(again) >= 1), timeout=15, what="the recheck after restart")
        rerun = run_times(again)[0]
        if not 7.0 <= rerun - first <= 10.0:
            print("\n".join(f"{r.time - first:.2f} {r.level} {r.message[:150]}" for r in again.records()))
        assert 7.0 <= rerun - first <= 10.0, rerun - first  # at the deadline: not at once, not never
        assert await finalized(objects, namespace, "k")
