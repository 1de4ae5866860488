"""
The operator of the deployment recipe (``examples/deploy/``): a deletion that waits for an
external system's callback, and looks again on a schedule in case the callback is lost.

On deletion the handler asks the external system to start (once per state: the idempotency key
lets the external system deduplicate), and is ``Pending`` with a recheck: the finalizer stays, no
error is logged, and no API call is made while it waits. The callback sets
``status.deletion.state = "done"`` and wakes the handler at once; without one, the handler runs
again every ``RECHECK_SECONDS`` (60 by default) from the memory kept in the object, on whichever
replica is active, without a write.

    kopf run examples/deploy/operator.py --namespace=NS --peering=kopf-outcomes --priority=N
"""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()

RECHECK_SECONDS = float(os.environ.get("RECHECK_SECONDS", "60"))


async def start_external_deletion(namespace: str, name: str, key: str) -> None:
    """Ask the external system to delete its side, deduplicated by ``key``; it calls back later."""


@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
async def delete_fn(namespace: str | None, name: str, status: kopf.Status, logger: kopf.Logger,
                    **_: Any) -> kopf_outcomes.Outcome:
    if status.get("deletion", {}).get("state") == "done":
        return kopf_outcomes.Success()
    memory = kopf_outcomes.recall()
    if not memory.acted_on_this_state:
        await start_external_deletion(namespace or "", name, memory.idempotency_key)
        logger.info("Asked the external system to delete its side.")
    return kopf_outcomes.Pending("waiting for the external system to call back", recheck=RECHECK_SECONDS)
