"""
The kind x outcome table on the real API server, with ``kopf run``: timers and daemons keep ticking
quietly (no busy loop, no stall of the event loop), a startup activity's plain Pending stops the
start with an error that names it, a sub-handler's Pending parks its parent until the callback,
retain holds on every final failure of a deletion handler, and a handler's own status writes
neither wake it nor change its idempotency key.
"""
from __future__ import annotations

import asyncio
import re

import pytest

from kopf_outcomes.memory import RELEASE_ANNOTATION
from kopf_outcomes_testing.cluster.audit import AuditLog
from tests.e2e.conftest import create_example, eventually
from tests.e2e.releases import stamped
from tests.e2e.test_memory import patch
from tests.e2e.test_outcomes import finalized, gone, runs, start_deleting

OPERATOR = "tests/e2e/operators/kinds_operator.py"


async def patch_status(objects, namespace: str, name: str, body: dict) -> None:
    """As the external system calls back: through the status subresource, which the CRD has."""
    await objects.patch_namespaced_custom_object_status("kopf.dev", "v1", namespace, "kopfexamples", name, body,
                                                        _content_type="application/merge-patch+json")


def ticks(op) -> int:
    return sum(1 for r in op.records() if r.message == "Timer 'tick' is invoked.")


async def test_a_rechecking_timer_ticks_on_its_recheck_and_never_stalls_the_loop(objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await create_example(objects, namespace, "t", {"timer": "recheck"})
        await op.wait_for(lambda r: "is pending: checking again soon" in r.message, what="the first tick")
        await asyncio.sleep(6)
        assert 2 <= ticks(op) <= 5  # every 2 s: not thousands (a stale delay of 0 was a busy loop)
        lags = [float(m.group(1)) for r in op.records() if (m := re.match(r"loop lag max ([\d.]+)", r.message))]
        assert lags and max(lags) < 0.5, lags  # the event loop was never held
        assert not [r for r in op.records(f"{namespace}/t") if r.level in ("WARNING", "ERROR")]


async def test_a_timer_that_is_pending_skips_the_tick_and_ticks_again(objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await create_example(objects, namespace, "s", {"timer": "pending"})
        await op.wait_for(lambda r: "is pending: nothing to do" in r.message, what="the first tick")
        await asyncio.sleep(3.5)
        assert ticks(op) >= 3  # every interval (1 s): a plain Pending does not stop the timer


async def test_a_daemon_that_is_pending_is_refused_by_name_and_a_rechecking_one_restarts(
        objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await create_example(objects, namespace, "d1", {"daemon": "pending"})
        await create_example(objects, namespace, "d2", {"daemon": "recheck"})
        refused = await op.wait_for(lambda r: "no meaning in a handler of kind 'daemon'" in r.message,
                                    what="the refusal")
        assert refused.level == "ERROR" and refused.object == f"{namespace}/d1"
        await asyncio.sleep(3.5)
        restarts = [r for r in op.records(f"{namespace}/d2") if r.message.startswith("Daemon 'guard' is pending")]
        assert 3 <= len(restarts) <= 5  # restarted after each 1 s pause, quietly
        assert not [r for r in op.records(f"{namespace}/d2") if r.level in ("WARNING", "ERROR")]


async def test_a_startup_activity_that_is_pending_stops_the_start_with_an_error_naming_it(namespace, operator):
    op = operator("tests/e2e/operators/startup_pending_operator.py")
    with pytest.raises(AssertionError, match="the operator exited"):
        await op.start()
    assert "kind 'activity'" in op.text()


async def test_a_pending_sub_handler_parks_its_parent_until_the_callback(cluster, objects, namespace, operator):
    audit = AuditLog(cluster.audit_log)
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "c", {"onDelete": "children"})
        await op.wait_for(lambda r: "'with_children' is pending" in r.message, what="the parent parked")
        await asyncio.sleep(1)
        mark, before = audit.mark(), runs(op, "with_children")
        await asyncio.sleep(4)
        assert runs(op, "with_children") == before  # parked: no ten-year sleep, no retry, no touch
        assert audit.writes(since=mark, user_agent="kopf", namespace=namespace, name="c") == []
        assert await finalized(objects, namespace, "c")
        await patch_status(objects, namespace, "c", {"status": {"callback": "done"}})
        await eventually(lambda: gone(objects, namespace, "c"), timeout=10, what="the object gone")


@pytest.mark.parametrize("path", ["retries", "timeout", "bug"])
async def test_retain_holds_on_every_final_failure_until_released(path, objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, path, {"onDelete": path})
        if path == "timeout":  # parked: Kopf checks timeout= when a change runs it again, past 2 s
            await op.wait_for(lambda r: "'timed_out' is pending" in r.message, what="parked")
            await asyncio.sleep(3)
            await patch(objects, namespace, path, {"metadata": {"labels": {"changed": "yes"}}})
        await op.wait_for(lambda r: "The finalizer is retained" in r.message, timeout=30, what="retained")
        await asyncio.sleep(3)
        assert await finalized(objects, namespace, path)  # kept, past retries=, timeout= and errors=PERMANENT
        handler = {"retries": "exhausted", "timeout": "timed_out", "bug": "buggy"}[path]
        release = await stamped(objects, namespace, path, handler)
        await patch(objects, namespace, path, {"metadata": {"annotations": {RELEASE_ANNOTATION: release}}})
        await eventually(lambda: gone(objects, namespace, path), timeout=15, what="released")


async def test_a_handlers_own_status_write_neither_wakes_it_nor_changes_its_key(
        cluster, objects, namespace, operator):
    audit = AuditLog(cluster.audit_log)
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "w", {"onDelete": "status-write"})
        await op.wait_for(lambda r: "'writes_status' is pending" in r.message, what="Pending")
        await asyncio.sleep(1)
        mark = audit.mark()
        await asyncio.sleep(5)
        assert runs(op, "writes_status") == 1  # its own write (a new timestamp) did not wake it
        assert audit.writes(since=mark, user_agent="kopf", namespace=namespace, name="w") == []
        op.kill()
    async with operator(OPERATOR) as again:  # a restart: the same state, already acted on
        await asyncio.sleep(4)
        starts = [r for r in [*op.records(), *again.records()] if r.message.startswith("starting the external")]
        assert len(starts) == 1, starts
        await patch_status(objects, namespace, "w", {"status": {"deletion": {"state": "done"}}})
        await eventually(lambda: gone(objects, namespace, "w"), timeout=10, what="the object gone")
