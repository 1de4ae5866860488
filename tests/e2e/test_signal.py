"""
``kopf-outcomes signal`` (and ``kubectl outcomes signal``) on the real API server (issue 44): the
callback from the shell wakes the parked deletion at once, through the status subresource, as
``kopf_outcomes.client.signal()`` does from Python.
"""
from __future__ import annotations

import time

from kopf_outcomes_testing.cluster.audit import AuditLog
from tests.e2e.conftest import eventually
from tests.e2e.test_outcomes import gone, start_deleting
from tests.e2e.test_why import cli

OPERATOR = "examples/deploy/shards/operator.py"  # no SHARD: it serves its namespace; waits for status.deletion


async def test_the_callback_from_the_shell_wakes_the_parked_deletion_at_once(cluster, objects, namespace, operator):
    async with operator(OPERATOR, RECHECK_SECONDS="600") as op:
        await start_deleting(objects, namespace, "called", {})
        await op.wait_for(lambda r: r.message.startswith("Asked the external system"), what="the external start")
        await op.wait_for(lambda r: r.message.startswith("Handler 'delete_fn' is pending"), what="Pending")
        audit = AuditLog(cluster.audit_log)
        mark = audit.mark()
        code, output = await cli(cluster, "signal", "kex/called", "-n", namespace, "--status", "deletion.state=done")
        called = time.monotonic()  # the signal has landed (the command's own start is not the operator's time)
        assert code == 0, output
        assert output.strip() == "kopfexamples.kopf.dev/called signalled: status.deletion.state"
        await eventually(lambda: gone(objects, namespace, "called"), timeout=60, what="the object to go")
        # Woken by the change, not by the 600 s recheck: any bound far below it says so, also on a loaded machine.
        assert time.monotonic() - called < 60
        status_writes = [w for w in audit.writes(since=mark, namespace=namespace, name="called")
                         if w.subresource == "status" and w.verb == "patch"]
        assert status_writes, "the status was not patched through its subresource"


async def test_a_missing_object_and_a_kind_without_status_are_said(cluster, namespace):
    code, output = await cli(cluster, "signal", "kex/nope", "-n", namespace, "--status", "a=b")
    assert code == 1 and "404" in output and "not found" in output, output
    code, output = await cli(cluster, "signal", "kex/nope", "-n", namespace)
    assert code == 2 and "needs annotations or status" in output, output
