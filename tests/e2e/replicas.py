"""
Replicas of an operator as ``examples/deploy/`` runs them, on the local API server: Kopf's peering
CRDs, the recipe's RBAC and peering object (moved into the test's namespace), a ServiceAccount
token per replica, and the Deployment's own command line (priority from the pod's IP).

The API server's audit log tells the replicas' writes apart: each replica has a token of its
own, and the audit event names the token (``authentication.kubernetes.io/credential-id``).
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from kopf_outcomes_testing.cluster import ClusterInfo
from kopf_outcomes_testing.cluster.audit import AuditLog, Mark
from kopf_outcomes_testing.cluster.kubeconfig import write_kubeconfig
from kopf_outcomes_testing.process import OperatorProcess
from tests.e2e.conftest import ROOT

DEPLOY = ROOT / "examples" / "deploy"
CRDS = DEPLOY / "00-peering-crds.yaml"
MANIFESTS = sorted(DEPLOY.glob("*.yaml"))
NAMESPACE = "kopf-outcomes-system"  # the recipe's namespace
ACCOUNT = "kopf-outcomes-operator"
PEERING = "kopf-outcomes"
EXAMPLE = DEPLOY / "operator.py"
WRITES = ("create", "update", "patch", "delete")


def kubectl(cluster: ClusterInfo, *args: str, stdin: str | None = None) -> str:
    if shutil.which("kubectl") is None:
        raise AssertionError("kubectl is not installed; the replicas' tests apply the recipe with it")
    done = subprocess.run(["kubectl", "--kubeconfig", str(cluster.admin_kubeconfig), *args], input=stdin,
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def install_peering_crds(cluster: ClusterInfo) -> None:
    """Kopf's peering CRDs, once per cluster (as a cluster admin applies them; idempotent)."""
    kubectl(cluster, "apply", "-f", str(CRDS))
    kubectl(cluster, "wait", "--for=condition=Established", "--timeout=30s",
            "crd/kopfpeerings.kopf.dev", "crd/clusterkopfpeerings.kopf.dev")


def documents(*paths: Path) -> list[dict[str, Any]]:
    return [d for path in paths for d in yaml.safe_load_all(path.read_text()) if d]


def deployment() -> dict[str, Any]:
    return next(d for d in documents(*MANIFESTS) if d["kind"] == "Deployment")


def retargeted(namespace: str) -> list[dict[str, Any]]:
    """The recipe's RBAC and peering object, moved from its namespace into ``namespace`` (the
    cluster-scoped names get the namespace as a suffix); nothing else changed."""
    found = []
    for doc in documents(*MANIFESTS):
        if doc["kind"] in ("Namespace", "CustomResourceDefinition", "Deployment", "Service"):
            continue
        meta = doc["metadata"]
        if meta.get("namespace") == NAMESPACE:
            meta["namespace"] = namespace
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            meta["name"] = f"{meta['name']}-{namespace}"
        if doc["kind"] == "ClusterRoleBinding":
            doc["roleRef"]["name"] = f"{doc['roleRef']['name']}-{namespace}"
        for subject in doc.get("subjects", []):
            subject["namespace"] = namespace
        found.append(doc)
    return found


def apply_recipe(cluster: ClusterInfo, namespace: str) -> list[str]:
    """Apply the recipe's RBAC and peering object into ``namespace``; the cluster-scoped leftovers."""
    docs = retargeted(namespace)
    kubectl(cluster, "apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
    return [f"{d['kind'].lower()}/{d['metadata']['name']}" for d in docs
            if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]


def token_kubeconfig(cluster: ClusterInfo, namespace: str, path: Path) -> tuple[Path, str]:
    """A kubeconfig with a token of the recipe's ServiceAccount; and the token's credential id."""
    token = kubectl(cluster, "create", "token", ACCOUNT, "-n", namespace, "--duration=1h").strip()
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert cluster.ca_path is not None
    write_kubeconfig(path, server=cluster.server, ca_pem=Path(cluster.ca_path).read_bytes(), user=ACCOUNT,
                     token=token)
    return path, f"JTI={claims['jti']}"


def priority_of(pod_ip: str) -> int:
    a, b, c, d = (int(part) for part in pod_ip.split("."))
    return (a << 24) + (b << 16) + (c << 8) + d


class Replica(OperatorProcess):
    """One replica: the Deployment's command (``sh -c``), with the operator file and the loopback
    ports of this machine put in; POD_IP and POD_NAMESPACE as the downward API would set them."""

    def __init__(self, operator: Path, namespace: str, *, kubeconfig: Path, credential: str, pod_ip: str,
                 health_port: int, env: Mapping[str, str] | None = None, python: str = sys.executable) -> None:
        super().__init__(operator, namespace, kubeconfig=str(kubeconfig), cwd=ROOT, python=python,
                         env={"POD_IP": pod_ip, "POD_NAMESPACE": namespace, **(env or {})})
        self.credential = credential
        self.priority = priority_of(pod_ip)
        script = deployment()["spec"]["template"]["spec"]["containers"][0]["args"][0]
        self.script = (script.replace("/app/operator.py", str(operator))
                       .replace("exec kopf run ", f"exec {self.python} -m kopf run --verbose --log-format=json "
                                                  f"--log-refkey=object ")
                       .replace("http://0.0.0.0:8080/", f"http://127.0.0.1:{health_port}/"))

    async def start(self) -> Replica:
        pythonpath = os.pathsep.join(filter(None, [str(self.cwd), os.environ.get("PYTHONPATH")]))
        env = dict(os.environ, KUBECONFIG=self.kubeconfig, PYTHONPATH=pythonpath, **self.env)
        self._process = subprocess.Popen(["/bin/sh", "-c", self.script], stdout=self._log,
                                         stderr=subprocess.STDOUT, env=env, cwd=self.cwd, text=True)
        try:
            await self.wait_for(lambda r: r.message.startswith("Starting the watch-stream for "),
                                timeout=30, what="the replica to start")
        except BaseException:
            self.kill()
            raise
        return self

    def paused_at(self) -> list[float]:
        """When Kopf paused this replica for a peer of higher priority (its own log)."""
        return [r.time for r in self.records() if r.message.startswith("Pausing operations in favour of")]


def writes_by(audit: AuditLog, since: Mark, credential: str, namespace: str) -> list[dict[str, Any]]:
    """The writes in ``namespace`` made with one replica's token, from the API server's audit log."""
    return [event for event in _events(audit, since)
            if event.get("verb") in WRITES and (event.get("objectRef") or {}).get("namespace") == namespace
            and credential in ((event.get("user") or {}).get("extra") or {}).get(
                "authentication.kubernetes.io/credential-id", [])]


def _events(audit: AuditLog, since: Mark) -> Iterator[dict[str, Any]]:
    for path, offset in audit._segments(since):
        with path.open("rb") as log:
            log.seek(offset)
            for line in log:
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue
