"""The operator's side of the chaos suite: the external side effect, and the callback it waits for.

Every operator here starts one external process per object on deletion and waits (Pending) for
its callback: ``status.chaos.<operator> = "done"``, where the operator's name comes from
``$CHAOS_OPERATOR`` ("main" by default), so that two operators on one object wait for their own.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import aiohttp
import kopf

OPERATOR = os.environ.get("CHAOS_OPERATOR", "main")


def called_back(status: Mapping[str, Any]) -> bool:
    """Whether the external system has called back to this operator for this object."""
    chaos = status.get("chaos")
    return isinstance(chaos, Mapping) and chaos.get(OPERATOR) == "done"


async def start_external(namespace: str, name: str, key: str) -> None:
    """Ask the external system (at $EXTERNAL_SYSTEM_URL) to start, passing the idempotency key."""
    url = os.environ["EXTERNAL_SYSTEM_URL"]
    payload = {"namespace": namespace, "name": name, "key": key, "operator": OPERATOR}
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        async with session.post(f"{url}/start", json=payload) as response:
            response.raise_for_status()


SELECTION = os.environ.get("SELECTION", "client")  # checked at import: Kopf retries a failing startup
if SELECTION not in ("client", "server") or (
        SELECTION == "server" and not hasattr(kopf.OperatorSettings().watching, "label_selectors")):
    raise ValueError(f"SELECTION={SELECTION!r}: expected 'client', or 'server' on Kopf 1.45 and later")


def select_on_the_server(settings: kopf.OperatorSettings, label: str, shard: str) -> None:
    """With ``$SELECTION=server``, a shard by label watches only its own objects: the API server
    selects them (Kopf 1.45 and later); by default, Kopf filters every object's events itself."""
    if SELECTION == "server":
        settings.watching.label_selectors["kopf.dev", "kopfexamples"] = f"{label}={shard}"
