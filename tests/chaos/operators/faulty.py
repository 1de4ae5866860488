"""The side-effect deletion with a plugin that fails on purpose (see fault_plugin), its errors= mode
from $CHAOS_ERRORS. The handler's own answers are plain values and exceptions that the plugin classifies."""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes
from tests.chaos.operators.common import called_back, start_external
from tests.chaos.operators.fault_plugin import WAITING, FaultPlugin, Waiting

kopf_outcomes.install(plugins=[FaultPlugin()])
ERRORS = kopf.ErrorsMode[os.environ.get("CHAOS_ERRORS", "TEMPORARY")]


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", backoff=1, errors=ERRORS)
async def delete_fn(namespace: str | None, name: str, status: kopf.Status, labels: kopf.Labels,
                    logger: kopf.Logger, **_: Any) -> str | None:
    if called_back(status):
        return None  # a plain success: classified by the plugins too
    memory = kopf_outcomes.recall()
    if not memory.acted_on_this_state:
        await start_external(namespace or "", name, memory.idempotency_key)
        logger.info("Asked the external system to start.")
    if labels.get("chaos-style") == "exception":
        raise Waiting(WAITING)
    return WAITING
