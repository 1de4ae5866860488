"""A parent's deletion waits for its children (ConfigMaps it owns): with kopf-outcomes, parked on
them ($MODE=outcomes); in stock Kopf, polling with TemporaryError(delay=5) ($MODE=stock)."""
from __future__ import annotations

import os
from typing import Any

import kopf
from kubernetes_asyncio import client, config

import kopf_outcomes

if os.environ.get("MODE") == "outcomes":
    kopf_outcomes.install()

    @kopf_outcomes.depends_on_objects(kopf_outcomes.owned("v1", "configmaps"))
    @kopf.on.delete("kopf.dev", "v1", "kopfexamples")
    def delete_fn(**_: Any) -> object:
        if kopf_outcomes.recall().objects:
            return kopf_outcomes.Pending("waiting for the children to go")
        return None

else:
    @kopf.on.delete("kopf.dev", "v1", "kopfexamples")
    async def delete_fn(uid: str, namespace: str, **_: Any) -> None:
        await config.load_kube_config()
        async with client.ApiClient() as api:
            listing = await client.CoreV1Api(api).list_namespaced_config_map(namespace)
        if any(owner.uid == uid for item in listing.items for owner in item.metadata.owner_references or ()):
            raise kopf.TemporaryError("waiting for the children to go", delay=5)
