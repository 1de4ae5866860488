"""
Stock Kopf as a shard by label ($SHARD), configured as Kopf asks of several operators on one
resource: a finalizer of its own (shards sharing one remove it from each other's objects, Kopf
issue 664). The deletion starts the external process on its first attempt (keyed by the object's
uid) and polls with ``TemporaryError`` until the callback.
"""
from __future__ import annotations

import os
from typing import Any

import kopf

from tests.chaos.operators.common import called_back, select_on_the_server, start_external

SHARD = os.environ["SHARD"]
SHARD_LABEL = "kopf-outcomes.example.com/shard"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = f"shard-{SHARD}.example.com/finalizer"
    select_on_the_server(settings, SHARD_LABEL, SHARD)


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", labels={SHARD_LABEL: SHARD})
async def delete_fn(namespace: str | None, name: str, uid: str, status: kopf.Status, retry: int,
                    logger: kopf.Logger, **_: Any) -> None:
    if called_back(status):
        return
    if retry == 0:
        await start_external(namespace or "", name, uid)
        logger.info("Asked the external system to start.")
    raise kopf.TemporaryError("waiting for the external system to call back", delay=float(os.environ["POLL"]))
