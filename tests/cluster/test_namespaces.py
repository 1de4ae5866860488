"""The namespace fixture's clean-up: objects (even held by finalizers) and the namespace go."""
from __future__ import annotations

from kopf_outcomes_testing.cluster import ClusterInfo
from kopf_outcomes_testing.cluster.resources import GROUP, PLURAL, VERSION
from kopf_outcomes_testing.namespaces import create_namespace, delete_namespace


def test_delete_namespace_removes_held_objects(k8s_cluster: ClusterInfo) -> None:
    admin = k8s_cluster.admin_client()
    name = create_namespace(admin)
    collection = f"/apis/{GROUP}/{VERSION}/namespaces/{name}/{PLURAL}"
    status, _ = admin.request("POST", collection, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "KopfExample",
        "metadata": {"name": "held", "finalizers": ["kopf-outcomes.test/hold"]}})
    assert status == 201

    delete_namespace(admin, name)

    status, listing = admin.request("GET", f"/apis/{GROUP}/{VERSION}/{PLURAL}")
    assert status == 200
    assert not [i for i in listing["items"] if i["metadata"]["namespace"] == name]
    status, _ = admin.request("GET", f"/api/v1/namespaces/{name}")
    assert status == 404
