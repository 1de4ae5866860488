"""Removing kopf-outcomes from an operator: the documented way out for parked objects (real API server)."""
from __future__ import annotations

import asyncio

from tests.e2e.conftest import eventually, get_example
from tests.e2e.test_memory import patch
from tests.e2e.test_outcomes import OPERATOR, finalized, runs, start_deleting


async def test_a_parked_object_is_released_to_stock_kopf_by_removing_its_progress(objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "left", {"onDelete": "pending"})
        await op.wait_for(lambda r: "is pending" in r.message, what="Pending")

    # The operator, now without kopf-outcomes: for stock Kopf the handler is delayed for ten years.
    async with operator(OPERATOR, INSTALL_KOPF_OUTCOMES="0") as stock:
        await patch(objects, namespace, "left", {"spec": {"onDelete": "plain"}})
        await asyncio.sleep(2)
        assert runs(stock) == 0 and await finalized(objects, namespace, "left")

        # The way out (docs/safety.md): remove the handler's progress; Kopf then runs it afresh.
        # Both of Kopf's progress storages: annotations (newer Kopf's default) and, where a Kopf keeps
        # it there too (1.37's "smart" storage), status.kopf.progress.
        await patch(objects, namespace, "left", {"metadata": {"annotations": {"kopf.zalando.org/delete_fn": None}}})
        await objects.patch_namespaced_custom_object_status(
            "kopf.dev", "v1", namespace, "kopfexamples", "left",
            {"status": {"kopf": {"progress": {"delete_fn": None}}}}, _content_type="application/merge-patch+json")
        await eventually(lambda: _gone(objects, namespace, "left"), what="the object to go")
        assert runs(stock) == 1


async def _gone(objects, namespace: str, name: str) -> bool:
    return await get_example(objects, namespace, name) is None
