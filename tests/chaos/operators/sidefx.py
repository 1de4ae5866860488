"""A deletion that starts an external process once per state (by its idempotency key) and waits."""
from __future__ import annotations

import datetime
import os
from typing import Any

import kopf

import kopf_outcomes
from tests.chaos.operators.common import OPERATOR, called_back, start_external

kopf_outcomes.install()
# $CHAOS_DEPENDS_ON=own: wake only on this operator's own callback, not on every change of the object.
DEPENDS_ON = [f"status.chaos.{OPERATOR}"] if os.environ.get("CHAOS_DEPENDS_ON") == "own" else None
# $CHAOS_STATUS_WRITE=1: the handler writes a changing value into the status on every run.
STATUS_WRITE = os.environ.get("CHAOS_STATUS_WRITE") == "1"
# $CHAOS_SUCCEED=1: a deletion that fires and forgets: it starts the external process and succeeds at once.
SUCCEED = os.environ.get("CHAOS_SUCCEED") == "1"


@kopf_outcomes.handler_options(depends_on=DEPENDS_ON)
@kopf.on.delete("kopf.dev", "v1", "kopfexamples", backoff=1)
async def delete_fn(namespace: str | None, name: str, status: kopf.Status, patch: kopf.Patch,
                    logger: kopf.Logger, **_: Any) -> kopf_outcomes.Outcome:
    if called_back(status):
        return kopf_outcomes.Success()
    memory = kopf_outcomes.recall()
    if not memory.acted_on_this_state:
        await start_external(namespace or "", name, memory.idempotency_key)
        logger.info("Asked the external system to start.")
    if STATUS_WRITE:
        patch.status["deletion"] = {"requested": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    if SUCCEED:
        return kopf_outcomes.Success()
    return kopf_outcomes.Pending("waiting for the external system to call back")
