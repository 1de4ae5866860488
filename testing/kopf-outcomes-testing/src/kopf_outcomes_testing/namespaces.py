"""Test namespaces: created fresh, and deleted the way a real cluster would delete them.

Unless started with its controllers, this control plane runs no kube-controller-manager, so
nothing empties or finalizes a deleted namespace: it would stay ``Terminating`` forever, and its
objects would still show up in cluster-wide lists and watches (e.g. to operators run with
``--all-namespaces`` in later tests). So we empty it ourselves, for the core and the custom
resources, then finalize it: at once, and the same with or without the controllers.
"""
from __future__ import annotations

from typing import Any

from kopf_outcomes_testing.cluster.api import RestClient

MERGE_PATCH = "application/merge-patch+json"


def create_namespace(admin: RestClient, prefix: str = "kopf-outcomes-test-") -> str:
    """Create a namespace with a generated, never reused name; return the name."""
    status, body = admin.request("POST", "/api/v1/namespaces", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"generateName": prefix}})
    if status != 201:
        raise RuntimeError(f"cannot create a test namespace: HTTP {status}: {body}")
    return str(body["metadata"]["name"])


def delete_namespace(admin: RestClient, name: str) -> None:
    """Delete every core and custom object in it (finalizers dropped), then the namespace."""
    for collection in _collections(admin, name):
        _purge(admin, collection)
    status, _ = admin.request("DELETE", f"/api/v1/namespaces/{name}")
    if status == 404:
        return
    status, namespace = admin.request("GET", f"/api/v1/namespaces/{name}")
    if status == 200:
        namespace["spec"]["finalizers"] = []
        admin.request("PUT", f"/api/v1/namespaces/{name}/finalize", namespace)


def _collections(admin: RestClient, namespace: str) -> list[str]:
    """URL paths of the namespaced core resources and of every custom resource."""
    paths = []
    status, core = admin.request("GET", "/api/v1")
    for resource in core.get("resources", []) if status == 200 else []:
        if (resource.get("namespaced") and "/" not in resource["name"]
                and {"list", "delete"} <= set(resource.get("verbs", []))):
            paths.append(f"/api/v1/namespaces/{namespace}/{resource['name']}")
    status, crds = admin.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
    for crd in crds.get("items", []) if status == 200 else []:
        spec = crd["spec"]
        if spec["scope"] == "Namespaced":
            version = next(v["name"] for v in spec["versions"] if v.get("storage"))
            paths.append(f"/apis/{spec['group']}/{version}/namespaces/{namespace}"
                         f"/{spec['names']['plural']}")
    return paths


def _purge(admin: RestClient, collection: str) -> None:
    status, listing = admin.request("GET", collection)
    items: list[Any] = listing.get("items", []) if status == 200 else []
    for item in items:
        path = f"{collection}/{item['metadata']['name']}"
        if item["metadata"].get("finalizers"):
            admin.request("PATCH", path, {"metadata": {"finalizers": None}},
                          content_type=MERGE_PATCH)
        admin.request("DELETE", path)
