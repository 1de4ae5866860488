"""Wrong use on the real API server: an outcome that reaches stock Kopf never releases a finalizer."""
from __future__ import annotations

import asyncio

import pytest

from tests.e2e.test_outcomes import OPERATOR, finalized, start_deleting


@pytest.mark.parametrize("mode", ["pending", "fatal"])  # returned Pending; raised Fatal
async def test_an_outcome_without_install_keeps_the_finalizer_and_names_install(objects, namespace, operator, mode):
    async with operator(OPERATOR, INSTALL_KOPF_OUTCOMES="0") as op:
        await start_deleting(objects, namespace, "forgot", {"onDelete": mode})
        await op.wait_for(lambda r: "kopf_outcomes.install() was not called" in r.message,
                          what="an error naming install()")
        await asyncio.sleep(2)
        assert await finalized(objects, namespace, "forgot")
        named = [r for r in op.records() if "kopf_outcomes.install() was not called" in r.message
                 and r.level != "DEBUG"]  # Kopf's debug dumps of the body quote the stored message too
        assert named and all(r.level == "ERROR" for r in named)
        assert op._process is not None and op._process.poll() is None  # the operator keeps running
