"""``why`` of a kind by a served version that is not the preferred one, on the real API server
(issue 44, finding 5): kubectl accepts any served version, and so does ``why``."""
from __future__ import annotations

import copy

from tests.e2e.crds import crd, ensure
from tests.e2e.test_stuck_coverage import cli

PLURAL = "versionedexamples"


def two_versions() -> dict:
    body = crd(PLURAL, "VersionedExample")
    v1 = body["spec"]["versions"][0]
    v1beta1 = copy.deepcopy(v1)
    v1beta1.update(name="v1beta1", storage=False)
    body["spec"]["versions"] = [v1, v1beta1]
    return body


async def test_a_served_version_that_is_not_preferred_is_found(api, cluster, objects, namespace):
    await ensure(api, two_versions())
    await objects.create_namespaced_custom_object("kopf.dev", "v1", namespace, PLURAL, {
        "apiVersion": "kopf.dev/v1", "kind": "VersionedExample", "metadata": {"name": "x"}, "spec": {}})
    code, out, err = await cli(cluster.admin_kubeconfig, "why", f"{PLURAL}.v1beta1.kopf.dev/x", "-n", namespace)
    assert code == 0, out + err
    assert out.startswith(f"{PLURAL}.kopf.dev/x in namespace {namespace}\n"), out
    code, out, err = await cli(cluster.admin_kubeconfig, "why", f"{PLURAL}.v2.kopf.dev/x", "-n", namespace)
    assert code == 1 and f"no resource kind '{PLURAL}.v2.kopf.dev'" in err, out + err
