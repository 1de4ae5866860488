"""Policies on the real API server: one handler, two meanings; Kopf issue 981 in one line."""
from __future__ import annotations

import asyncio

from tests.e2e.test_outcomes import OPERATOR, events, finalized, runs, start_deleting


async def test_same_code_is_retry_at_warning_under_one_policy(api, objects, namespace, operator):
    async with operator(OPERATOR, KOPF_OUTCOMES_POLICY="examples/policies/retry-warning.toml") as op:
        await start_deleting(objects, namespace, "t", {"onDelete": "temporary-error"})
        record = await op.wait_for(lambda r: "delete_fn" in r.message and "failed" in r.message, what="Retry")
        assert (record.level, record.message) == ("WARNING", "Handler 'delete_fn' failed temporarily: stock temporary")
        await asyncio.sleep(1.5)
        assert runs(op) == 1  # the policy's delay (10 s) replaces the handler's own (1 s)
        assert await finalized(objects, namespace, "t")
        posted = await events(api, namespace, "t")
        assert ("Warning", "Handler 'delete_fn' failed temporarily: stock temporary") in posted


async def test_same_code_is_pending_under_another_policy(api, objects, namespace, operator):
    async with operator(OPERATOR, KOPF_OUTCOMES_POLICY="examples/policies/pending.toml") as op:
        await start_deleting(objects, namespace, "t", {"onDelete": "temporary-error"})
        record = await op.wait_for(lambda r: "delete_fn" in r.message and "pending" in r.message, what="Pending")
        assert (record.level, record.message) == ("INFO", "Handler 'delete_fn' is pending: stock temporary")
        await asyncio.sleep(2)
        assert runs(op) == 1  # parked until something changes
        assert await finalized(objects, namespace, "t")
        assert not [r for r in op.records(f"{namespace}/t") if r.level in ("WARNING", "ERROR")]


async def test_kopf_981_temporary_errors_at_info_with_a_one_line_policy(api, objects, namespace, operator):
    policy = "examples/policies/quiet-temporary-errors.toml"
    assert sum(1 for line in open(policy) if line.strip() and not line.startswith("#")) == 1
    async with operator(OPERATOR, KOPF_OUTCOMES_POLICY=policy) as op:
        await start_deleting(objects, namespace, "t", {"onDelete": "temporary-error"})
        await asyncio.sleep(0.1)
        record = await op.wait_for(lambda r: "failed temporarily" in r.message, what="the retry")
        assert (record.level, record.message) == ("INFO", "Handler 'delete_fn' failed temporarily: stock temporary")
        await asyncio.sleep(2.5)
        assert runs(op) >= 2  # the handler's own delay=1 is kept
        assert not [r for r in op.records(f"{namespace}/t") if r.level == "ERROR"]
        posted = await events(api, namespace, "t")
        assert ("Normal", "Handler 'delete_fn' failed temporarily: stock temporary") in posted
        assert not [event for event in posted if event[0] == "Error"]
