"""
The operator of the sharding recipe (``examples/deploy/shards/``): the deployment recipe's
operator, run as several Deployments (shards), each serving its own part of the objects.

- By label: ``SHARD=a`` serves the objects labelled ``kopf-outcomes.example.com/shard=a``
  (the handlers' ``labels=`` filter, declared with ``kopf_outcomes.shard()``: the shards share
  one finalizer, and none removes it from another shard's object); objects without the label
  are no shard's. On Kopf 1.45 and later, the shard also watches only its own objects (the API
  server selects them: ``settings.watching.label_selectors``), so the other shards' events
  never reach it; ``SHARD_SELECTION=client`` turns that off (Kopf then filters every object).
- By namespace: no ``SHARD``; each Deployment passes its own ``kopf run --namespace`` patterns.

An object may move between shards while its deletion waits (relabelled, or its namespace given to
another Deployment): the shard it leaves keeps the finalizer and writes nothing for it; the shard
it joins continues from the memory kept in the object. The shard label is not part of the
handler's state (``ignore=``), so the move is not a new state: the external system is not asked
again (the same idempotency key), and the callback wakes the handler on its new shard.

    SHARD=a kopf run examples/deploy/shards/operator.py --all-namespaces --peering=kopf-outcomes-shard-a
"""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()

SHARD_LABEL = "kopf-outcomes.example.com/shard"
SHARD = os.environ.get("SHARD") or None  # None: this Deployment shards by namespace (or serves all)
# A shard by label serves the objects labelled with its value, and never removes the (shared)
# finalizer of another shard's object; by namespace, the watched namespaces are the whole filter.
SHARD_FILTER = kopf_outcomes.shard(SHARD_LABEL, SHARD) if SHARD else {}
# Where the label is selected: by the API server (Kopf 1.45 and later), or by Kopf on every event.
SERVER_SELECTS = hasattr(kopf.OperatorSettings().watching, "label_selectors")
SHARD_SELECTION = os.environ.get("SHARD_SELECTION") or ("server" if SERVER_SELECTS else "client")
if SHARD_SELECTION not in ("server", "client") or (SHARD_SELECTION == "server" and not SERVER_SELECTS):
    raise ValueError(f"SHARD_SELECTION={SHARD_SELECTION!r}: expected 'server' (Kopf 1.45 and later) or 'client' "
                     f"(this Kopf {'has' if SERVER_SELECTS else 'has no'} settings.watching.label_selectors)")
RECHECK_SECONDS = float(os.environ.get("RECHECK_SECONDS", "60"))


async def start_external_deletion(namespace: str, name: str, key: str) -> None:
    """Ask the external system to delete its side, deduplicated by ``key``; it calls back later."""


@kopf.on.startup()
def watch_own_shard(settings: kopf.OperatorSettings, **_: Any) -> None:
    """A shard by label lists and watches only its own objects: the API server filters them."""
    if SHARD and SHARD_SELECTION == "server":
        settings.watching.label_selectors["kopf.dev", "kopfexamples"] = f"{SHARD_LABEL}={SHARD}"


@kopf_outcomes.handler_options(ignore=[["metadata", "labels", SHARD_LABEL]])
@kopf.on.delete("kopf.dev", "v1", "kopfexamples", labels=SHARD_FILTER)
async def delete_fn(namespace: str | None, name: str, status: kopf.Status, logger: kopf.Logger,
                    **_: Any) -> kopf_outcomes.Outcome:
    if status.get("deletion", {}).get("state") == "done":
        return kopf_outcomes.Success()
    memory = kopf_outcomes.recall()
    if not memory.acted_on_this_state:
        await start_external_deletion(namespace or "", name, memory.idempotency_key)
        logger.info(f"Asked the external system to delete its side (key {memory.idempotency_key}).")
    return kopf_outcomes.Pending("waiting for the external system to call back", recheck=RECHECK_SECONDS)
