"""Fixtures for end-to-end tests: the real API server, a namespace, objects, operators."""
from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config

from kopf_outcomes.cluster import ClusterInfo, ensure_running
from tests.support.operator_process import OperatorProcess

ROOT = Path(__file__).resolve().parents[2]

# Plugins installed in this environment stay out of operators unless a test lets them in.
os.environ["KOPF_OUTCOMES_PLUGINS"] = ""


@pytest.fixture(scope="session")
def cluster() -> ClusterInfo:
    return ensure_running()


@pytest.fixture()
async def api(cluster: ClusterInfo) -> AsyncIterator[client.ApiClient]:
    api = await config.new_client_from_config(config_file=str(cluster.admin_kubeconfig))
    async with api:
        yield api


@pytest.fixture()
async def namespace(api: client.ApiClient) -> AsyncIterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(api)
    await core.create_namespace({"metadata": {"name": name}})
    yield name
    # Leave no object stuck: drop our finalizers, then the namespace.
    objects = client.CustomObjectsApi(api)
    listing = await objects.list_namespaced_custom_object("kopf.dev", "v1", name, "kopfexamples")
    for item in listing["items"]:
        await objects.patch_namespaced_custom_object(
            "kopf.dev", "v1", name, "kopfexamples", item["metadata"]["name"],
            {"metadata": {"finalizers": None}}, _content_type="application/merge-patch+json")
    await core.delete_namespace(name)


@pytest.fixture()
def objects(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


@pytest.fixture()
def operator(cluster: ClusterInfo, namespace: str) -> Callable[..., OperatorProcess]:
    """Make an operator process for a file (relative to the repository; ``async with`` starts it)."""
    def make(path: str, **env: str) -> OperatorProcess:
        return OperatorProcess(ROOT / path, namespace, kubeconfig=str(cluster.admin_kubeconfig), env=env)
    return make


async def create_example(objects: client.CustomObjectsApi, namespace: str, name: str,
                         spec: dict[str, Any] | None = None) -> dict[str, Any]:
    body = {"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
            "metadata": {"name": name}, "spec": spec or {}}
    result: dict[str, Any] = await objects.create_namespaced_custom_object(
        "kopf.dev", "v1", namespace, "kopfexamples", body)
    return result


async def get_example(objects: client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        result: dict[str, Any] = await objects.get_namespaced_custom_object(
            "kopf.dev", "v1", namespace, "kopfexamples", name)
    except client.ApiException as e:
        if e.status == 404:
            return None
        raise
    return result


async def eventually(check: Callable[[], Awaitable[Any]], *, timeout: float = 20,
                     interval: float = 0.05, what: str = "the condition") -> Any:
    """Poll an async check until it returns a truthy value."""
    import asyncio
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)
