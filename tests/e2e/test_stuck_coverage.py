"""
``stuck`` and ``why`` say what they could not see, on the real API server (issue 34, findings
2-4, and issue 30): a user who may not list a kind, a cluster-scoped kind, an API group whose
discovery answers 503 (a registered APIService whose service does not exist), a missing object.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

from kubernetes_asyncio import client

from tests.e2e.conftest import create_example, eventually
from tests.e2e.crds import crd, ensure
from tests.e2e.test_memory import MERGE
from tests.e2e.test_why import BIN

HOLD = "example.com/hold"  # a finalizer nobody releases: the object stays deleting until the test lets it go


async def cli(kubeconfig: Path, *args: str) -> tuple[int, str, str]:
    env = dict(os.environ, KUBECONFIG=str(kubeconfig))
    process = await asyncio.create_subprocess_exec(str(BIN / "kopf-outcomes"), *args, env=env,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


@contextlib.asynccontextmanager
async def held(objects: client.CustomObjectsApi, plural: str, name: str, namespace: str | None,
               body: dict | None = None) -> AsyncIterator[None]:
    """An object being deleted with a finalizer held, for the duration."""
    release = {"metadata": {"finalizers": None}}
    if namespace is None:
        await objects.create_cluster_custom_object("kopf.dev", "v1", plural, body)
        await objects.delete_cluster_custom_object("kopf.dev", "v1", plural, name)
    else:
        await create_example(objects, namespace, name, {})
        await objects.patch_namespaced_custom_object("kopf.dev", "v1", namespace, plural, name,
                                                     {"metadata": {"finalizers": [HOLD]}}, _content_type=MERGE)
        await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, plural, name)
    try:
        yield
    finally:
        if namespace is None:
            await objects.patch_cluster_custom_object("kopf.dev", "v1", plural, name, release, _content_type=MERGE)
        else:
            await objects.patch_namespaced_custom_object("kopf.dev", "v1", namespace, plural, name, release,
                                                         _content_type=MERGE)


async def test_a_kind_the_user_may_not_list_is_named_never_read_as_nothing(cluster, objects, namespace):
    restricted = cluster.restricted_kubeconfig  # may list KopfExamples, and no other kind
    async with held(objects, "kopfexamples", "h", namespace):
        code, out, err = await cli(restricted, "stuck", "-n", namespace, "-o", "json")
        assert code == 1, out + err
        assert [r["name"] for r in json.loads(out)] == ["h"]  # what it could read, it shows
        # One line per reason, the kinds counted (issue 44, finding 3), not a line per kind.
        lines = err.splitlines()
        assert lines[0].startswith("Not read (") and len(lines) <= 4, err
        forbidden = [line for line in lines if line.startswith("  403 Forbidden: ")]
        assert len(forbidden) == 1 and int(forbidden[0].split()[2]) >= 20, err

        code, out, _ = await cli(restricted, "stuck", "secrets", "-n", namespace)  # the one kind, not readable
        assert code == 1, out
        assert "No object is being deleted" not in out
        assert out.startswith(f"No object found being deleted with finalizers held in namespace {namespace!r} "
                              f"among the kinds read (0 kinds read), but not every kind could be read.")
        assert "\n  secrets: 403 " in out

        code, out, _ = await cli(restricted, "stuck", "kex", "-n", namespace)  # everything asked was read
        assert code == 0 and "Not read" not in out and "kopfexamples.kopf.dev/h" in out, out


async def test_cluster_scoped_kinds_are_read_cluster_wide_as_kubectl_does(api, cluster, objects, namespace):
    await ensure(api, crd("clusterexamples", "ClusterExample", scope="Cluster"))
    name = f"held-{namespace}"
    body = {"apiVersion": "kopf.dev/v1", "kind": "ClusterExample",
            "metadata": {"name": name, "finalizers": [HOLD]}, "spec": {}}
    async with held(objects, "clusterexamples", name, None, body):
        code, out, _ = await cli(cluster.admin_kubeconfig, "stuck", "clusterexamples", "-n", namespace)
        assert code == 0 and f"clusterexamples.kopf.dev/{name}" in out, out  # -n does not apply to it
        code, out, _ = await cli(cluster.admin_kubeconfig, "stuck", "-n", namespace, "-o", "json")
        assert code == 0, out
        assert [(r["resource"], r["namespace"]) for r in json.loads(out) if r["name"] == name] == \
               [("clusterexamples.kopf.dev", None)]  # every kind, cluster-scoped ones included
        code, out, _ = await cli(cluster.admin_kubeconfig, "why", f"clusterexamples/{name}", "-n", namespace)
        assert code == 0 and f"clusterexamples.kopf.dev/{name}\n" in out, out


async def test_an_api_group_whose_discovery_fails_is_named_and_the_rest_read(api, cluster, objects, namespace):
    group = f"{namespace}.unavailable.kopf-outcomes.dev"  # listed before kopf.dev (a higher priority)
    service = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": f"v1.{group}"},
               "spec": {"group": group, "version": "v1", "groupPriorityMinimum": 19000, "versionPriority": 15,
                        "insecureSkipTLSVerify": True, "service": {"name": "no-such-service", "namespace": namespace}}}
    registration = client.CustomObjectsApi(api)
    await registration.create_cluster_custom_object("apiregistration.k8s.io", "v1", "apiservices", service)
    try:
        async with held(objects, "kopfexamples", "h", namespace):
            async def partial() -> str | None:
                code, out, _ = await cli(cluster.admin_kubeconfig, "stuck", "-n", namespace)
                return out if code == 1 else None
            out = await eventually(partial, timeout=20, what="the API group's discovery to fail")
            assert f"  {group}/v1 (discovery): 503 " in out, out
            assert "kopfexamples.kopf.dev/h" in out  # the rest is read
            code, out, _ = await cli(cluster.admin_kubeconfig, "stuck", "kex", "-n", namespace)
            assert code == 0 and "kopfexamples.kopf.dev/h" in out, out  # a kind of another group: all read
            code, out, _ = await cli(cluster.admin_kubeconfig, "why", "kex/h", "-n", namespace)
            assert code == 0 and "finalizer: example.com/hold" in out, out
    finally:
        await registration.delete_cluster_custom_object("apiregistration.k8s.io", "v1", "apiservices", f"v1.{group}")


async def test_where_they_looked_is_said_and_a_missing_object_is_one_line(cluster, namespace):
    code, out, _ = await cli(cluster.admin_kubeconfig, "stuck", "kex", "-n", namespace)
    assert (code, out.strip()) == (0, f"No object is being deleted with finalizers held in namespace "
                                      f"{namespace!r} (1 kind read). Every namespace: add -A.")
    code, out, err = await cli(cluster.admin_kubeconfig, "why", "kex/nope", "-n", namespace)
    assert code == 1 and out == ""
    assert err.strip() == (f"Error: kopfexamples.kopf.dev 'nope' not found in namespace {namespace!r}. Another "
                           f"namespace: -n NAMESPACE; every namespace: kubectl get kopfexamples.kopf.dev -A "
                           f"--field-selector metadata.name=nope")
