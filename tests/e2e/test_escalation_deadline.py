"""A time-based escalation on the real API server: a parked Pending runs again at its deadline
(issue 34, finding 1), with no write before it, and ``why`` shows the deadline."""
from __future__ import annotations

import asyncio
import datetime
import time

from kopf_outcomes_testing.cluster.audit import AuditLog
from tests.e2e.conftest import eventually
from tests.e2e.test_outcomes import OPERATOR, gone, runs, start_deleting
from tests.e2e.test_why import why

AFTER = 8  # seconds: the policy's threshold (any number of seconds is allowed; short keeps CI cheap)
INVOKED = "Handler 'delete_fn' is invoked."


async def test_a_parked_pending_escalates_at_its_deadline_without_writes_before(
        cluster, objects, namespace, operator, tmp_path):
    policy = tmp_path / "escalate.toml"
    policy.write_text(f'escalate = [{{ after_seconds = {AFTER}, outcome = "fatal" }}]\n')
    audit = AuditLog(cluster.audit_log)
    async with operator(OPERATOR, KOPF_OUTCOMES_POLICY=str(policy)) as op:
        await start_deleting(objects, namespace, "e", {"onDelete": "pending"})
        first = await op.wait_for(lambda r: r.message == INVOKED, what="the first run")
        await op.wait_for(lambda r: "is pending" in r.message, what="the Pending")
        await asyncio.sleep(1)  # its conclusion is written (one PATCH, with the memory)
        mark = audit.mark()

        report = await why(cluster, namespace, "e")
        handler = next(h for h in report["handlers"] if h["id"] == "delete_fn")
        deadline = datetime.datetime.fromisoformat(handler["escalatesAt"])
        started = datetime.datetime.fromisoformat(handler["progress"]["started"]).replace(tzinfo=datetime.timezone.utc)
        assert (deadline - started).total_seconds() == AFTER

        await asyncio.sleep(max(0.0, first.time + AFTER - 1.5 - time.time()))  # until just before the deadline
        assert runs(op) == 1  # parked: nothing ran before the deadline
        assert audit.writes(since=mark, user_agent="kopf", namespace=namespace, name="e") == []

        await eventually(lambda: gone(objects, namespace, "e"), timeout=AFTER + 10, what="the escalation")
        assert runs(op) == 2
        messages = [(r.level, r.message) for r in op.records(f"{namespace}/e")]
        assert ("ERROR", f"Handler 'delete_fn' failed permanently: waiting for the test "
                         f"(escalated to fatal after {AFTER} seconds)") in messages


async def test_after_a_restart_the_deadline_is_rearmed_from_the_memory(cluster, objects, namespace, operator, tmp_path):
    policy = tmp_path / "escalate.toml"
    policy.write_text(f'escalate = [{{ after_seconds = {AFTER}, outcome = "fatal" }}]\n')
    audit = AuditLog(cluster.audit_log)
    async with operator(OPERATOR, KOPF_OUTCOMES_POLICY=str(policy)) as op:
        await start_deleting(objects, namespace, "k", {"onDelete": "pending"})
        first = await op.wait_for(lambda r: r.message == INVOKED, what="the first run")
        await op.wait_for(lambda r: "is pending" in r.message, what="the Pending")
        await asyncio.sleep(1)
        op.kill()
    mark = audit.mark()
    async with operator(OPERATOR, KOPF_OUTCOMES_POLICY=str(policy)) as again:  # well before the deadline
        await asyncio.sleep(max(0.0, first.time + AFTER - 1.5 - time.time()))
        assert runs(again) == 0  # parked, and its deadline not come: no run at the restart
        assert audit.writes(since=mark, user_agent="kopf", namespace=namespace, name="k") == []
        await eventually(lambda: gone(objects, namespace, "k"), timeout=AFTER + 10, what="the escalation")
        assert runs(again) == 1
        assert time.time() - first.time >= AFTER
