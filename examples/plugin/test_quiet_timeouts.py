"""
The plugin's own test, on a real API server: the local control plane of kopf-outcomes-testing,
through its pytest fixtures (k8s_cluster, k8s_api, k8s_namespace, kopf_operator).
"""
from __future__ import annotations

import asyncio
import re
from typing import Any

import kopf
import quiet_timeouts
from kubernetes_asyncio.client import CustomObjectsApi

import kopf_outcomes
from kopf_outcomes_testing import ClusterInfo, operator_registry
from kopf_outcomes_testing.pytest_plugin import KopfOperatorFactory


async def test_a_timeout_is_retried_at_warning(
        k8s_cluster: ClusterInfo, k8s_api: Any, k8s_namespace: str,
        kopf_operator: KopfOperatorFactory) -> None:
    registry = operator_registry(k8s_cluster)
    runs: list[int] = []

    @kopf.on.create("kopf.dev", "v1", "kopfexamples", registry=registry, id="create_fn")
    def create_fn(retry: int, **_: Any) -> None:
        runs.append(retry)
        if retry == 0:
            raise TimeoutError("the backend did not answer")

    kopf_outcomes.install(plugins=[quiet_timeouts], entry_points=False)
    try:
        with kopf_operator(namespace=k8s_namespace, registry=registry) as runner:
            await CustomObjectsApi(k8s_api).create_namespaced_custom_object(
                "kopf.dev", "v1", k8s_namespace, "kopfexamples",
                {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "slow"}})
            for _ in range(300):  # the retry comes after the plugin's 10 s, not Kopf's 60 s
                if len(runs) == 2:
                    break
                await asyncio.sleep(0.1)
    finally:
        kopf_outcomes.uninstall()

    assert runner.exit_code == 0, runner.output
    assert runs == [0, 1]
    assert re.search(r"\[WARNING *\] \[[^]]+/slow\] Handler 'create_fn' failed temporarily: "
                     r"timed out: the backend did not answer", runner.output), runner.output
    assert "[ERROR" not in runner.output
