"""
The scale-out scenario's replica in stock Kopf, for comparison: it polls with
``TemporaryError(delay=$CHAOS_RECHECK)`` (Kopf's only way to look again), and starts the external
process on the first attempt (``retry == 0``), keyed by the object's uid.
"""
from __future__ import annotations

import os
from typing import Any

import kopf

from tests.chaos.operators.common import called_back, start_external

RECHECK = float(os.environ.get("CHAOS_RECHECK", "2"))


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.peering.lifetime = int(os.environ.get("PEERING_LIFETIME", "60"))


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", backoff=1)
async def delete_fn(namespace: str | None, name: str, uid: str, status: kopf.Status, retry: int,
                    logger: kopf.Logger, **_: Any) -> None:
    if called_back(status):
        return
    if retry == 0:
        await start_external(namespace or "", name, uid)
        logger.info("Asked the external system to start.")
    raise kopf.TemporaryError("waiting for the external system to call back", delay=RECHECK)
