"""A stock handler with any delay behaves exactly as without the patch: parking is marked, not inferred."""
from __future__ import annotations

import asyncio

from tests.e2e.conftest import eventually
from tests.e2e.test_memory import patch
from tests.e2e.test_outcomes import OPERATOR, finalized, runs, start_deleting

SIX_YEARS = 6 * 365 * 24 * 3600


async def test_a_stock_temporary_error_of_six_years_is_neither_woken_nor_spared_its_touch(
        objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "far", {"onDelete": "temporary-years"})
        await op.wait_for(lambda r: "failed temporarily: far away" in r.message, what="the stock retry")
        # Kopf's own reaction to a delayed handler: it sleeps for it (capped), to touch the object later.
        await op.wait_for(lambda r: r.message.startswith("Sleeping for") and "delayed handlers" in r.message,
                          what="Kopf's sleep for the delayed handler")

        # A change of the object does not wake it: only a handler parked by kopf-outcomes wakes.
        await patch(objects, namespace, "far", {"metadata": {"labels": {"changed": "yes"}}})
        await asyncio.sleep(2)
        assert runs(op) == 1
        assert await finalized(objects, namespace, "far")


async def test_a_parked_pending_makes_kopf_neither_sleep_nor_touch(objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "parked", {"onDelete": "pending"})
        await op.wait_for(lambda r: "is pending" in r.message, what="Pending")
        await asyncio.sleep(1.5)
        sleeping = [r for r in op.records(f"{namespace}/parked") if r.message.startswith("Sleeping for")]
        assert sleeping == []
        await patch(objects, namespace, "parked", {"spec": {"onDelete": "success"}})
        await eventually(lambda: asyncio.sleep(0, runs(op) == 2), what="the change to wake it")
