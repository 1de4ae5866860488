"""A shard by label ($SHARD) of the sharding recipe's shape: the deletion starts the external process
once per state (by its idempotency key) and waits, parked, for its callback."""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes
from tests.chaos.operators.common import called_back, select_on_the_server, start_external

kopf_outcomes.install()
SHARD_LABEL = "kopf-outcomes.example.com/shard"
SHARD_FILTER = kopf_outcomes.shard(SHARD_LABEL, os.environ["SHARD"])


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    select_on_the_server(settings, SHARD_LABEL, os.environ["SHARD"])


@kopf_outcomes.handler_options(ignore=[["metadata", "labels", SHARD_LABEL]])
@kopf.on.delete("kopf.dev", "v1", "kopfexamples", labels=SHARD_FILTER, backoff=1)
async def delete_fn(namespace: str | None, name: str, status: kopf.Status, logger: kopf.Logger,
                    **_: Any) -> kopf_outcomes.Outcome:
    if called_back(status):
        return kopf_outcomes.Success()
    memory = kopf_outcomes.recall()
    if not memory.acted_on_this_state:
        await start_external(namespace or "", name, memory.idempotency_key)
        logger.info("Asked the external system to start.")
    return kopf_outcomes.Pending("waiting for the external system to call back")
