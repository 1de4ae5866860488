"""Plugins installed as packages, found through their entry points, on the real API server."""
from __future__ import annotations

import asyncio

from tests.e2e.conftest import eventually, get_example
from tests.e2e.test_outcomes import OPERATOR, finalized, runs, start_deleting


async def test_an_installed_plugin_changes_an_outcome(objects, namespace, operator):
    async with operator(OPERATOR, KOPF_OUTCOMES_PLUGINS="sample") as op:
        await start_deleting(objects, namespace, "q", {"onDelete": "temporary-quiet"})
        record = await op.wait_for(lambda r: "failed temporarily" in r.message, what="the retry")
        assert (record.level, record.message) == ("INFO", "Handler 'delete_fn' failed temporarily: quiet: waiting")
        await eventually(lambda: asyncio.sleep(0, runs(op) >= 2), what="the retry to run")
        assert not [r for r in op.records(f"{namespace}/q") if r.level == "ERROR"]


async def test_without_the_plugin_the_same_error_is_stock(objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "q", {"onDelete": "temporary-quiet"})
        record = await op.wait_for(lambda r: "failed temporarily" in r.message, what="the retry")
        assert record.level == "ERROR"


async def test_a_broken_plugin_is_contained_and_keeps_the_finalizer(objects, namespace, operator):
    async with operator(OPERATOR, KOPF_OUTCOMES_PLUGINS="broken") as op:
        await start_deleting(objects, namespace, "b", {"onDelete": "success"})
        record = await op.wait_for(lambda r: "plugin 'broken' failed" in r.message and r.object is not None,
                                   what="the containment")
        assert record.level == "ERROR"
        assert "RuntimeError: boom in the broken plugin" in record.message
        assert record.message.startswith("Handler 'delete_fn' failed temporarily: plugin")
        assert "the finalizer is kept" in record.message
        await eventually(lambda: asyncio.sleep(0, runs(op) >= 3), what="retries after the failure")
        assert await finalized(objects, namespace, "b")  # a success was never let through
        assert op._process is not None and op._process.poll() is None  # the operator keeps running


async def test_conditions_plugin_writes_status_and_does_not_wake_the_handler(objects, namespace, operator):
    async with operator(OPERATOR, KOPF_OUTCOMES_PLUGINS="conditions") as op:
        await start_deleting(objects, namespace, "c", {"onDelete": "pending"})
        await op.wait_for(lambda r: "is pending" in r.message, what="Pending")

        async def condition():
            body = await get_example(objects, namespace, "c")
            return [c for c in (body or {}).get("status", {}).get("conditions", [])
                    if c["type"] == "DeleteFnSucceeded"]

        [written] = await eventually(condition, what="the condition")
        assert (written["status"], written["reason"], written["message"]) == \
               ("False", "Pending", "Handler 'delete_fn' is pending: waiting for the test. "
                                    "It runs again when the object changes.")
        await asyncio.sleep(2)
        assert runs(op) == 1  # its own status write did not wake the parked handler
