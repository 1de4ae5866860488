"""An operator using kopf-outcomes runs under Kopf's own documented RBAC, nothing added (real API server)."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client, utils

from kopf_outcomes_testing.cluster.kubeconfig import write_kubeconfig
from kopf_outcomes_testing.process import OperatorProcess
from tests.e2e.conftest import ROOT, eventually, get_example
from tests.e2e.test_memory import patch
from tests.e2e.test_outcomes import OPERATOR, runs, start_deleting

RBAC = ROOT / "examples" / "rbac" / "operator-rbac.yaml"


async def service_account_kubeconfig(cluster: Any, api: Any, namespace: str, tmp_path: Path) -> Path:
    """A kubeconfig of the RBAC's service account (kopf-outcomes-operator), with a token of an hour."""
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[],
                                                                                 expiration_seconds=3600))
    token = await client.CoreV1Api(api).create_namespaced_service_account_token(
        "kopf-outcomes-operator", namespace, request)
    kubeconfig = tmp_path / "operator.kubeconfig"
    assert cluster.ca_path is not None  # our own local control plane
    write_kubeconfig(kubeconfig, server=cluster.server, ca_pem=Path(cluster.ca_path).read_bytes(),
                     user="kopf-outcomes-operator", token=token.status.token)
    return kubeconfig


async def test_the_seed_story_under_the_documented_minimal_rbac(cluster, api, objects, namespace, tmp_path: Path):
    documents = list(yaml.safe_load_all(RBAC.read_text().replace("NAMESPACE", namespace)))
    for document in documents:
        await utils.create_from_dict(api, document)
    try:
        kubeconfig = await service_account_kubeconfig(cluster, api, namespace, tmp_path)

        async with OperatorProcess(ROOT / OPERATOR, namespace, kubeconfig=str(kubeconfig), cwd=ROOT) as op:
            try:
                await start_deleting(objects, namespace, "guarded", {"onDelete": "pending"})
            except AssertionError:
                print(op.text()[-4000:])
                raise
            await op.wait_for(lambda r: "is pending" in r.message, what="Pending")
            await patch(objects, namespace, "guarded", {"spec": {"onDelete": "success"}})
            await eventually(lambda: _gone(objects, namespace, "guarded"), what="the object to go")
            assert runs(op) == 2
            # A refusal reads "... is forbidden: User ... cannot ..." (reason Forbidden, code 403);
            # a bare "403" is no sign of one: Kopf's DEBUG lines dump bodies, uids and timestamps.
            denied = [r.message for r in op.records() if "forbidden" in r.message.lower()
                      or r.level in ("ERROR", "CRITICAL")]
            assert denied == []
    finally:
        rbac = client.RbacAuthorizationV1Api(api)
        await rbac.delete_cluster_role_binding(f"kopf-outcomes-operator-{namespace}")
        await rbac.delete_cluster_role(f"kopf-outcomes-operator-{namespace}")
        await asyncio.sleep(0)


async def _gone(objects, namespace: str, name: str) -> bool:
    return await get_example(objects, namespace, name) is None
