"""A parent whose deletion waits, parked, until its children are gone.

The children are ConfigMaps that the parent owns (``kopf.adopt`` sets their ownerReferences).
The delete handler deletes them and waits: no polling, no ERROR lines, no writes to the parent
while it waits; it runs again at once when a child changes or goes. With
``kubectl delete --cascade=foreground``, Kubernetes' garbage collector deletes the children, and
the same handler waits for it.

    kopf run examples/wait_for_children/example.py --verbose
"""
from __future__ import annotations

from typing import Any

import kopf
from kubernetes_asyncio import client, config

import kopf_outcomes

kopf_outcomes.install()


@kopf.on.create("kopf.dev", "v1", "kopfexamples")
async def create_fn(body: kopf.Body, namespace: str | None, spec: kopf.Spec, **_: Any) -> None:
    """Make the children: ConfigMaps owned by the parent."""
    await config.load_kube_config()
    async with client.ApiClient() as api:
        for index in range(int(spec.get("children", 3))):
            child: dict[str, Any] = {"metadata": {"name": f"{body.metadata.name}-{index}"}}
            kopf.adopt(child, owner=body)
            await client.CoreV1Api(api).create_namespaced_config_map(namespace, child)  # type: ignore[arg-type]


@kopf_outcomes.depends_on_objects(kopf_outcomes.owned("v1", "configmaps"))
@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
async def delete_fn(**_: Any) -> object:
    """Delete the children, then wait (parked) until the last one is gone."""
    children = kopf_outcomes.recall().objects  # what this parent owns now, from Kopf's index
    if not children:
        return None  # all gone: the finalizer is released
    await config.load_kube_config()
    async with client.ApiClient() as api:
        for child in children:
            if not child.deleting and child.namespace is not None:
                await client.CoreV1Api(api).delete_namespaced_config_map(child.name, child.namespace)
    return kopf_outcomes.Pending("waiting for the children to go")
