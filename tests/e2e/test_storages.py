"""A parked object under a custom progress storage costs nothing: 1 run, 0 writes over the window
($KOPF_OUTCOMES_PARKED_WINDOW seconds, 20 by default; 300 for the figure in the issue's note)."""
from __future__ import annotations

import asyncio
import os

import pytest

from kopf_outcomes_testing.cluster.audit import AuditLog
from tests.e2e.test_outcomes import finalized, runs, start_deleting

WINDOW = float(os.environ.get("KOPF_OUTCOMES_PARKED_WINDOW", "20"))


@pytest.mark.parametrize("storage", ["status", "annotations"])
async def test_a_parked_object_under_a_custom_storage_costs_nothing(storage, cluster, objects, namespace, operator):
    audit = AuditLog(cluster.audit_log)
    async with operator("tests/e2e/operators/storage_operator.py", STORAGE=storage) as op:
        await start_deleting(objects, namespace, "p", {})
        await op.wait_for(lambda r: "is pending" in r.message, what="Pending")
        await asyncio.sleep(2)  # the parking PATCH and its event
        mark = audit.mark()
        await asyncio.sleep(WINDOW)
        writes = audit.writes(since=mark, user_agent="kopf", namespace=namespace, name="p")
        print(f"\n{storage}: {runs(op)} run(s), {len(writes)} write(s) in {WINDOW:.0f} s parked")
        assert runs(op) == 1
        assert writes == []
        assert await finalized(objects, namespace, "p")
