"""On the real API server: a CRD created by the harness is served before any scenario uses it."""
from __future__ import annotations

import copy
import uuid

from kubernetes_asyncio import client

from benchmarks.kube import api_client, ensure_crd_served
from kopf_outcomes_testing.cluster import ClusterInfo
from kopf_outcomes_testing.cluster.resources import EXAMPLE_CRD


async def test_a_new_crd_is_established_and_listable_when_the_wait_returns(k8s_cluster: ClusterInfo) -> None:
    plural = f"benchtests{uuid.uuid4().hex[:8]}"
    crd = copy.deepcopy(EXAMPLE_CRD)
    crd["metadata"]["name"] = f"{plural}.{crd['spec']['group']}"
    crd["spec"]["names"] = {"kind": f"BenchTest{plural[-8:]}", "plural": plural, "singular": plural[:-1]}
    api = await api_client(k8s_cluster.admin_kubeconfig)
    extensions = client.ApiextensionsV1Api(api)
    try:
        waited = await ensure_crd_served(api, crd, timeout=60)
        # No retry, no wait: the very next calls are answered.
        listing = await client.CustomObjectsApi(api).list_cluster_custom_object(
            crd["spec"]["group"], "v1", plural)
        assert listing["items"] == []
        current = await extensions.read_custom_resource_definition(crd["metadata"]["name"])
        assert any(c.type == "Established" and c.status == "True" for c in current.status.conditions)
        assert waited >= 0
        # Again, for a CRD that exists and is served: nothing to create, nothing to wait for.
        await ensure_crd_served(api, crd, timeout=60)
    finally:
        await extensions.delete_custom_resource_definition(crd["metadata"]["name"])
        await api.close()
