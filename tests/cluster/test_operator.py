"""Against the real API server: a Kopf operator run through the fixture handles the example."""
from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kopf
from kubernetes_asyncio.client import CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from kopf_outcomes_testing import operator_registry
from kopf_outcomes_testing.cluster import ClusterInfo
from kopf_outcomes_testing.cluster.resources import GROUP, PLURAL, VERSION
from kopf_outcomes_testing.pytest_plugin import KopfOperatorFactory

MERGE_PATCH = "application/merge-patch+json"


async def eventually(condition: Callable[[], Any], timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await _holds(condition):
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.1)


async def _holds(condition: Callable[[], Any]) -> bool:
    result = condition()
    return bool(await result if asyncio.iscoroutine(result) else result)


async def test_operator_handles_create_update_delete(
        k8s_cluster: ClusterInfo, k8s_api: Any, k8s_namespace: str,
        kopf_operator: KopfOperatorFactory) -> None:
    registry = operator_registry(k8s_cluster)
    calls: list[tuple[str, str, Any]] = []

    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry, id="created")
    def created(name: str, spec: kopf.Spec, **_: Any) -> None:
        calls.append(("create", name, spec.get("field")))

    @kopf.on.update(GROUP, VERSION, PLURAL, registry=registry, id="updated")
    def updated(name: str, spec: kopf.Spec, **_: Any) -> None:
        calls.append(("update", name, spec.get("field")))

    @kopf.on.delete(GROUP, VERSION, PLURAL, registry=registry, id="deleted")
    def deleted(name: str, **_: Any) -> None:
        calls.append(("delete", name, None))

    api = CustomObjectsApi(k8s_api)
    args = (GROUP, VERSION, k8s_namespace, PLURAL)

    async def is_gone() -> bool:
        try:
            await api.get_namespaced_custom_object(*args, "handled")
        except ApiException as e:
            return e.status == 404
        return False

    with kopf_operator(namespace=k8s_namespace, registry=registry) as runner:
        await api.create_namespaced_custom_object(*args, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "KopfExample",
            "metadata": {"name": "handled"}, "spec": {"field": "one"}})
        await eventually(lambda: ("create", "handled", "one") in calls)

        await api.patch_namespaced_custom_object(*args, "handled", {"spec": {"field": "two"}},
                                                 _content_type=MERGE_PATCH)
        await eventually(lambda: ("update", "handled", "two") in calls)

        await api.delete_namespaced_custom_object(*args, "handled")
        await eventually(lambda: ("delete", "handled", None) in calls)
        await eventually(is_gone)  # the operator released its finalizer

    assert runner.exit_code == 0, runner.output
    assert [c[0] for c in calls] == ["create", "update", "delete"]
    assert "Handler 'created' succeeded." in runner.output


async def test_operator_from_a_file(k8s_api: Any, k8s_namespace: str, tmp_path: Path,
                                    kopf_operator: KopfOperatorFactory) -> None:
    operator = tmp_path / "operator.py"
    operator.write_text(textwrap.dedent(f"""
        import kopf

        @kopf.on.create("{GROUP}", "{VERSION}", "{PLURAL}")
        def greet(name, patch, **_):
            patch.status["greeted"] = name
    """))
    api = CustomObjectsApi(k8s_api)
    args = (GROUP, VERSION, k8s_namespace, PLURAL)

    async def greeted() -> bool:
        obj = await api.get_namespaced_custom_object(*args, "from-file")
        return bool(obj.get("status", {}).get("greeted") == "from-file")

    with kopf_operator(operator, namespace=k8s_namespace) as runner:
        await api.create_namespaced_custom_object(*args, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "KopfExample",
            "metadata": {"name": "from-file"}, "spec": {}})
        await eventually(greeted)

    assert runner.exit_code == 0, runner.output
    assert "Handler 'greet' succeeded." in runner.output
