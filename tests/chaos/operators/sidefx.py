"""A deletion that starts an external process once per state (by its idempotency key) and waits."""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes
from tests.chaos.operators.common import OPERATOR, called_back, start_external

kopf_outcomes.install()
# $CHAOS_DEPENDS_ON=own: wake only on this operator's own callback, not on every change of the object.
DEPENDS_ON = [f"status.chaos.{OPERATOR}"] if os.environ.get("CHAOS_DEPENDS_ON") == "own" else None


@kopf_outcomes.handler_options(depends_on=DEPENDS_ON)
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
