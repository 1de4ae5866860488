"""What every fresh control plane gets: the example CRD and RBAC for the restricted user.

The CRD lives here (not only in ``examples/crd.yaml``) because the package must install it
for users who have no checkout; a test keeps the two identical.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kopf_outcomes_testing.cluster.api import RestClient
from kopf_outcomes_testing.cluster.errors import ClusterError

GROUP = "kopf.dev"
VERSION = "v1"
PLURAL = "kopfexamples"
CRD_NAME = f"{PLURAL}.{GROUP}"
RESTRICTED_USER = "restricted"
RESTRICTED_ROLE = "kopf-outcomes:restricted"

_PRESERVE = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}

EXAMPLE_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": CRD_NAME},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {
            "kind": "KopfExample",
            "plural": PLURAL,
            "singular": "kopfexample",
            "shortNames": ["kex"],
        },
        "versions": [{
            "name": VERSION,
            "served": True,
            "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": _PRESERVE, "status": _PRESERVE},
            }},
        }],
    },
}

# May read and patch the example objects, but not their status: where a policy's writes
# (e.g. to the status) are refused by RBAC, tests show how that is reported.
RESTRICTED_CLUSTER_ROLE: dict[str, Any] = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": RESTRICTED_ROLE},
    "rules": [{"apiGroups": [GROUP], "resources": [PLURAL],
               "verbs": ["get", "list", "watch", "patch"]}],
}

RESTRICTED_BINDING: dict[str, Any] = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRoleBinding",
    "metadata": {"name": RESTRICTED_ROLE},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                "name": RESTRICTED_ROLE},
    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                  "name": RESTRICTED_USER}],
}


def install(admin: RestClient, restricted: RestClient, *, timeout: float) -> None:
    """Apply the CRD and RBAC, and wait until both are in effect, so tests can use them at once."""
    admin.apply(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}",
                EXAMPLE_CRD)
    admin.apply(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{RESTRICTED_ROLE}",
                RESTRICTED_CLUSTER_ROLE)
    admin.apply(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{RESTRICTED_ROLE}",
                RESTRICTED_BINDING)
    deadline = time.monotonic() + timeout
    _wait("the example CRD to be established", deadline, lambda: _crd_established(admin))
    _wait("the restricted user's RBAC to take effect", deadline,
          lambda: _may_patch_examples(restricted))


def _wait(what: str, deadline: float, check: Callable[[], bool]) -> None:
    while not check():
        if time.monotonic() > deadline:
            raise ClusterError(f"timed out waiting for {what}",
                               "check the kube-apiserver log in the state folder")
        time.sleep(0.1)


def _crd_established(admin: RestClient) -> bool:
    status, crd = admin.request(
        "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}")
    conditions = crd.get("status", {}).get("conditions", []) if status == 200 else []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def _may_patch_examples(restricted: RestClient) -> bool:
    status, review = restricted.request(
        "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {
                "group": GROUP, "resource": PLURAL, "verb": "patch", "namespace": "default"}},
        })
    return status == 201 and bool(review.get("status", {}).get("allowed"))
