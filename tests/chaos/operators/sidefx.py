"""A deletion that starts an external process once per state (by its idempotency key) and waits."""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes
from tests.chaos.operators.common import called_back, start_external

kopf_outcomes.install()


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", backoff=1)
async def delete_fn(namespace: str | None, name: str, status: kopf.Status, logger: kopf.Logger,
                    **_: Any) -> kopf_outcomes.Outcome:
    if called_back(status):
        return kopf_outcomes.Success()
    memory = kopf_outcomes.recall()
    if not memory.acted_on_this_state:
        await start_external(namespace or "", name, memory.idempotency_key)
        logger.info("Asked the external system to start.")
    return kopf_outcomes.Pending("waiting for the external system to call back")
