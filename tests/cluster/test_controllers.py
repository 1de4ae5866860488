"""With kube-controller-manager (``k8s_controllers``): owners' deletions cascade, namespaces go."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kopf_outcomes_testing.cluster import ClusterInfo
from kopf_outcomes_testing.cluster.api import RestClient
from kopf_outcomes_testing.cluster.resources import GROUP, PLURAL, VERSION
from kopf_outcomes_testing.namespaces import MERGE_PATCH, create_namespace, delete_namespace

TIMEOUT = 30.0
HOLD = "kopf-outcomes.test/hold"


def eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not check():
        assert time.monotonic() < deadline, f"not within {TIMEOUT:.0f}s: {what}"
        time.sleep(0.1)


@pytest.fixture
def admin(k8s_controllers: ClusterInfo) -> RestClient:
    return k8s_controllers.admin_client()


@pytest.fixture
def configmaps(admin: RestClient, k8s_namespace: str) -> str:
    return f"/api/v1/namespaces/{k8s_namespace}/configmaps"


def create(admin: RestClient, collection: str, name: str, *, owner: dict[str, Any] | None = None,
           finalizers: tuple[str, ...] = ()) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "finalizers": list(finalizers)}
    if owner is not None:
        metadata["ownerReferences"] = [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "blockOwnerDeletion": True}]
    status, body = admin.request("POST", collection, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata})
    assert status == 201, body
    return dict(body)


def delete(admin: RestClient, path: str, policy: str) -> None:
    status, body = admin.request("DELETE", path, {
        "apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": policy})
    assert status in (200, 202), body


def gone(admin: RestClient, path: str) -> bool:
    status, _ = admin.request("GET", path)
    return status == 404


def get(admin: RestClient, path: str) -> dict[str, Any]:
    status, body = admin.request("GET", path)
    assert status == 200, body
    return dict(body)


def test_background_deletion_collects_the_owned(admin: RestClient, configmaps: str) -> None:
    owner = create(admin, configmaps, "owner")
    create(admin, configmaps, "child", owner=owner)
    create(admin, configmaps, "bystander")

    delete(admin, f"{configmaps}/owner", "Background")

    eventually(lambda: gone(admin, f"{configmaps}/child"), "the child collected")
    assert gone(admin, f"{configmaps}/owner")
    assert not gone(admin, f"{configmaps}/bystander")  # not owned: kept


def test_foreground_deletion_waits_for_the_child(admin: RestClient, configmaps: str) -> None:
    owner = create(admin, configmaps, "owner")
    create(admin, configmaps, "child", owner=owner, finalizers=(HOLD,))  # gone when we say

    delete(admin, f"{configmaps}/owner", "Foreground")

    eventually(lambda: "deletionTimestamp" in get(admin, f"{configmaps}/child")["metadata"],
               "the collector deleting the child")
    waiting = get(admin, f"{configmaps}/owner")["metadata"]
    assert "deletionTimestamp" in waiting and "foregroundDeletion" in waiting["finalizers"]
    status, _ = admin.request("PATCH", f"{configmaps}/child", {"metadata": {"finalizers": None}},
                              content_type=MERGE_PATCH)
    assert status == 200
    eventually(lambda: gone(admin, f"{configmaps}/owner"), "the owner gone after its child")
    assert gone(admin, f"{configmaps}/child")


@pytest.fixture
def doomed_namespace(admin: RestClient) -> Iterator[str]:
    """A namespace the test deletes; removed the fixtures' way if the test could not."""
    name = create_namespace(admin)
    yield name
    delete_namespace(admin, name)


def test_namespace_deletion_completes(admin: RestClient, doomed_namespace: str) -> None:
    name = doomed_namespace
    create(admin, f"/api/v1/namespaces/{name}/configmaps", "content")
    examples = f"/apis/{GROUP}/{VERSION}/namespaces/{name}/{PLURAL}"
    status, _ = admin.request("POST", examples, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "KopfExample", "metadata": {"name": "custom"}})
    assert status == 201

    status, _ = admin.request("DELETE", f"/api/v1/namespaces/{name}")
    assert status == 200

    eventually(lambda: gone(admin, f"/api/v1/namespaces/{name}"), "the namespace gone")
    assert gone(admin, f"{examples}/custom")
