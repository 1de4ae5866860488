"""
The same story with stock Kopf, as its maintainer suggests today: poll with TemporaryError.

Every poll is logged at ERROR, posts an Error Event, and costs two API writes (the progress,
then the "touch-dummy" that wakes the operator up after the delay).
"""
from __future__ import annotations

import os
from typing import Any

import kopf

from examples.multistep_deletion.external_system import callback_done, start_external_deletion

POLL_DELAY = float(os.environ.get("STOCK_POLL_DELAY", "10"))


@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
async def delete_fn(
    namespace: str | None, name: str, status: kopf.Status, annotations: kopf.Annotations,
    retry: int, logger: kopf.Logger, **_: Any,
) -> None:
    if callback_done(status, annotations):
        logger.info("The external system has finished; releasing the object.")
        return
    if retry == 0:
        await start_external_deletion(namespace or "", name)
        logger.info("Asked the external system to delete its side.")
    raise kopf.TemporaryError("waiting for the external system to call back", delay=POLL_DELAY)
