"""CRDs that some e2e tests need besides the example one: made once per control plane, kept."""
from __future__ import annotations

import asyncio
from typing import Any

from kubernetes_asyncio import client

GROUP = "kopf.dev"
_PRESERVE = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}

# metav1.Condition as controller-gen declares it: the API server enforces these limits.
CONDITION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["lastTransitionTime", "message", "reason", "status", "type"],
    "properties": {
        "lastTransitionTime": {"type": "string", "format": "date-time"},
        "message": {"type": "string", "maxLength": 32768},
        "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
        "reason": {"type": "string", "maxLength": 1024, "minLength": 1,
                   "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
        "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
        "type": {"type": "string", "maxLength": 316,
                 "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                            r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"},
    },
}


def crd(plural: str, kind: str, *, scope: str = "Namespaced", conditions: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = dict(_PRESERVE)
    if conditions:
        status["properties"] = {"conditions": {"type": "array", "items": CONDITION_SCHEMA,
                                               "x-kubernetes-list-type": "map",
                                               "x-kubernetes-list-map-keys": ["type"]}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {"group": GROUP, "scope": scope,
                 "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
                 "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "properties": {"spec": _PRESERVE, "status": status}}}}]},
    }


async def ensure(api: client.ApiClient, body: dict[str, Any], timeout: float = 20) -> None:
    """Create the CRD unless it exists, and wait until it is served."""
    extensions = client.ApiextensionsV1Api(api)
    try:
        await extensions.create_custom_resource_definition(body)
    except client.ApiException as e:
        if e.status != 409:
            raise
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        found = await extensions.read_custom_resource_definition(body["metadata"]["name"])
        if any(c.type == "Established" and c.status == "True" for c in (found.status.conditions or [])):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"the CRD {body['metadata']['name']} was not established in {timeout} s")
