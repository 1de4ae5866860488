"""
A replica for the scale-out scenario: on deletion it starts the external process once per state
(by its idempotency key) and waits, rechecking every $CHAOS_RECHECK seconds (Pending(recheck=...)),
for ``status.chaos.main = "done"``. $PEERING_LIFETIME shortens Kopf's peering lifetime (60 s by
default) so that a standby notices a dead peer in seconds.
"""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes
from tests.chaos.operators.common import called_back, start_external

kopf_outcomes.install()
RECHECK = float(os.environ.get("CHAOS_RECHECK", "2"))


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.peering.lifetime = int(os.environ.get("PEERING_LIFETIME", "60"))


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", backoff=1)
async def delete_fn(namespace: str | None, name: str, status: kopf.Status, logger: kopf.Logger,
                    **_: Any) -> kopf_outcomes.Outcome:
    if called_back(status):
        return kopf_outcomes.Success()
    memory = kopf_outcomes.recall()
    if not memory.acted_on_this_state:
        await start_external(namespace or "", name, memory.idempotency_key)
        logger.info("Asked the external system to start.")
    return kopf_outcomes.Pending("waiting for the external system to call back", recheck=RECHECK)
