"""Against the real API server: the restricted user may patch KopfExamples, not their status."""
from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio.client import CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from kopf_outcomes_testing.cluster.resources import GROUP, PLURAL, VERSION

MERGE_PATCH = "application/merge-patch+json"


@pytest.fixture
async def example(k8s_api: Any, k8s_namespace: str) -> str:
    await CustomObjectsApi(k8s_api).create_namespaced_custom_object(
        GROUP, VERSION, k8s_namespace, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "KopfExample",
            "metadata": {"name": "guarded"}, "spec": {"field": "value"}})
    return "guarded"


async def test_restricted_user_may_patch_the_resource(
        k8s_restricted_api: Any, k8s_namespace: str, example: str) -> None:
    api = CustomObjectsApi(k8s_restricted_api)
    patched = await api.patch_namespaced_custom_object(
        GROUP, VERSION, k8s_namespace, PLURAL, example, {"spec": {"field": "changed"}},
        _content_type=MERGE_PATCH)
    assert patched["spec"]["field"] == "changed"


async def test_restricted_user_is_forbidden_the_status(
        k8s_restricted_api: Any, k8s_namespace: str, example: str) -> None:
    api = CustomObjectsApi(k8s_restricted_api)
    with pytest.raises(ApiException) as denied:
        await api.patch_namespaced_custom_object_status(
            GROUP, VERSION, k8s_namespace, PLURAL, example, {"status": {"x": 1}},
            _content_type=MERGE_PATCH)
    assert denied.value.status == 403


async def test_restricted_user_is_forbidden_secrets_and_creation(
        k8s_restricted_api: Any, k8s_namespace: str) -> None:
    with pytest.raises(ApiException) as secrets:
        await CoreV1Api(k8s_restricted_api).list_namespaced_secret(k8s_namespace)
    assert secrets.value.status == 403
    with pytest.raises(ApiException) as creation:
        await CustomObjectsApi(k8s_restricted_api).create_namespaced_custom_object(
            GROUP, VERSION, k8s_namespace, PLURAL, {
                "apiVersion": f"{GROUP}/{VERSION}", "kind": "KopfExample",
                "metadata": {"name": "not-allowed"}})
    assert creation.value.status == 403
