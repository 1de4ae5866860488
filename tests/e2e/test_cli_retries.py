"""
The real API server answers ``429 storage is (re)initializing`` with ``Retry-After: 1`` to a LIST of
a kind whose CRD was just established (its watch cache is still starting). ``why`` and ``stuck`` read
such kinds right after ``kubectl apply`` of Kopf's peering CRDs (the on-call page does), so the CLI's
client waits and asks again, as kubectl does; it read "could not be read: 429" before.
"""
from __future__ import annotations

import secrets
import subprocess
import time
import types

import pytest

from kopf_outcomes.diagnosis import kube
from kopf_outcomes.diagnosis.kube import Client, Kind
from kopf_outcomes_testing import ClusterInfo


def crd(group: str) -> str:
    return f"""apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: probes.{group}}}
spec:
  group: {group}
  scope: Cluster
  names: {{plural: probes, singular: probe, kind: Probe}}
  versions: [{{name: v1, served: true, storage: true,
              schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]
"""


def kubectl(cluster: ClusterInfo, *args: str, stdin: str | None = None) -> None:
    done = subprocess.run(["kubectl", "--kubeconfig", str(cluster.admin_kubeconfig), *args], input=stdin,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_kind_listed_as_soon_as_its_crd_is_established_is_read(cluster: ClusterInfo,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    group = f"p{secrets.token_hex(4)}.kopf-outcomes.test"
    waits: list[float] = []
    monkeypatch.setattr(kube, "time", types.SimpleNamespace(sleep=lambda s: (waits.append(s), time.sleep(s))))
    kubectl(cluster, "apply", "-f", "-", stdin=crd(group))
    try:
        kubectl(cluster, "wait", "--for=condition=Established", "--timeout=30s", f"crd/probes.{group}")
        monkeypatch.setenv("KUBECONFIG", str(cluster.admin_kubeconfig))
        listed = Client.from_kubeconfig().get(Kind(group, "v1", "probes", "Probe", namespaced=False).path(None))
        assert listed["items"] == []
        assert waits in ([], [1.0]), waits  # the server asked once for a second, or its cache was ready
    finally:
        kubectl(cluster, "delete", f"crd/probes.{group}", "--wait=false")
