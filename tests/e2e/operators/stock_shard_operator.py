"""
Stock Kopf (no kopf-outcomes) as a shard by label: a deletion handler that polls with
``TemporaryError`` until the callback sets ``status.deletion.state``, for objects labelled
``kopf-outcomes.example.com/shard=$SHARD``.
"""
from __future__ import annotations

import os
from typing import Any

import kopf

SHARD_LABEL = "kopf-outcomes.example.com/shard"


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", labels={SHARD_LABEL: os.environ["SHARD"]})
def delete_fn(status: kopf.Status, logger: kopf.Logger, retry: int, **_: Any) -> None:
    if status.get("deletion", {}).get("state") == "done":
        return
    if retry == 0:
        logger.info("Asked the external system to delete its side.")
    raise kopf.TemporaryError("waiting for the external system to call back", delay=30)
