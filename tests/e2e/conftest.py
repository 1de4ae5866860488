"""Fixtures for end-to-end tests: the real API server, a namespace, objects, operators."""
from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from kopf_outcomes_testing.cluster import ClusterInfo
from kopf_outcomes_testing.process import OperatorProcess

ROOT = Path(__file__).resolve().parents[2]

# Plugins installed in this environment stay out of operators unless a test lets them in.
os.environ["KOPF_OUTCOMES_PLUGINS"] = ""


# Short names for the package's own fixtures (kopf_outcomes_testing.pytest_plugin).
@pytest.fixture()
def cluster(k8s_cluster: ClusterInfo) -> ClusterInfo:
    return k8s_cluster


@pytest.fixture()
def api(k8s_api: client.ApiClient) -> client.ApiClient:
    return k8s_api


@pytest.fixture()
def namespace(k8s_namespace: str) -> str:
    return k8s_namespace


@pytest.fixture()
def objects(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


@pytest.fixture()
def operator(cluster: ClusterInfo, namespace: str) -> Callable[..., OperatorProcess]:
    """Make an operator process for a file (relative to the repository; ``async with`` starts it)."""
    def make(path: str, **env: str) -> OperatorProcess:
        return OperatorProcess(ROOT / path, namespace, kubeconfig=str(cluster.admin_kubeconfig), env=env,
                               cwd=ROOT)
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
