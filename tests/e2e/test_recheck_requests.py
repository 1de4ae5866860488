"""Quiet rechecks cost no request (issue 42, cost), counted in the audit log of a control plane of
the test's own that logs every request (the shared one logs writes only): under Kopf 1.45's
server-side selection, a recheck asked a LIST of its own whether its object was still selected."""
from __future__ import annotations

import asyncio

import kopf
import pytest
from kubernetes_asyncio import client

from benchmarks.kube import api_client, ensure_crd_served
from benchmarks.own_cluster import every_request_audited
from kopf_outcomes_testing.cluster.audit import AuditLog
from kopf_outcomes_testing.cluster.resources import EXAMPLE_CRD
from kopf_outcomes_testing.process import OperatorProcess
from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.skipif(not hasattr(kopf.OperatorSettings().watching, "label_selectors"),
                                reason="Kopf < 1.45 selects nothing on the server")
OPERATOR = ROOT / "tests/e2e/operators/selected_rechecks_operator.py"
SHARD_LABEL = "kopf-outcomes.example.com/shard"
NAMESPACE = "wakeups-rechecks"


async def test_quiet_rechecks_of_a_selected_resource_ask_no_list() -> None:
    async with every_request_audited("e2e-wakeups-rechecks") as cluster:
        api = await api_client(cluster.admin_kubeconfig)
        try:
            await ensure_crd_served(api, EXAMPLE_CRD)
            await client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
            objects = client.CustomObjectsApi(api)
            async with OperatorProcess(OPERATOR, NAMESPACE, kubeconfig=str(cluster.admin_kubeconfig), cwd=ROOT) as op:
                for name in ("a1", "a2", "a3"):
                    await objects.create_namespaced_custom_object("kopf.dev", "v1", NAMESPACE, "kopfexamples", {
                        "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                        "metadata": {"name": name, "labels": {SHARD_LABEL: "a"}}, "spec": {}})
                for name in ("a1", "a2", "a3"):
                    await op.wait_for(lambda r, name=name: "is pending: waiting for the external system" in r.message
                                      and r.object == f"{NAMESPACE}/{name}", what=f"{name} waits")
                audit = AuditLog(cluster.audit_log)
                mark, checked = audit.mark(), len(checks(op))
                await asyncio.sleep(6)
                rechecks = len(checks(op)) - checked
                lists = [r for r in audit.writes(since=mark, user_agent="kopf")
                         if r.verb == "list" and r.resource == "kopfexamples"]
        finally:
            await api.close()
    assert rechecks >= 9  # three objects, each every second
    assert lists == []  # was: one LIST per recheck


def checks(op: OperatorProcess) -> list[object]:
    return [r for r in op.records() if r.message == "Checked the external system."]
