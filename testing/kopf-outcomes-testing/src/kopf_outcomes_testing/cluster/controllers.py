"""kube-controller-manager next to a running API server: garbage collection, namespace deletion.

Without it, ownerReferences cascade nothing, a foreground deletion never completes and a
deleted namespace stays ``Terminating``. Only the two controllers that give those run: the
others (deployments, service-account tokens, nodes, ...) would need more set-up and cost CPU
for nothing here. It logs in with the admin kubeconfig; the audit log tells its writes apart by
its user agent (``kube-controller-manager/...``).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from kopf_outcomes_testing.cluster import processes
from kopf_outcomes_testing.cluster.api import RestClient
from kopf_outcomes_testing.cluster.errors import ClusterError
from kopf_outcomes_testing.cluster.info import ClusterInfo

NAME = "kube-controller-manager"
CONTROLLERS = ("garbage-collector-controller", "namespace-controller")
PORT_ATTEMPTS = 3  # a free port can be taken by others between choosing and binding it


def start(binary: Path, info: ClusterInfo, *, timeout: float,
          progress: Callable[[str], None]) -> processes.Process:
    """Start it against ``info``'s API server and wait until its ``/healthz`` answers ok."""
    if info.state_dir is None or info.ca_path is None:
        raise ClusterError(f"the cluster at {info.server} is not a local control plane of ours",
                           "controllers can be started only next to `kopf-outcomes cluster up`'s")
    attempt = 1
    while True:
        try:
            return _start_once(binary, info, info.state_dir, info.ca_path, timeout, progress)
        except processes.PortTaken:
            if attempt == PORT_ATTEMPTS:
                raise
            attempt += 1
            progress(f"the port chosen for {NAME} was taken meanwhile; retrying with another")


def _start_once(binary: Path, info: ClusterInfo, folder: Path, ca: Path, timeout: float,
                progress: Callable[[str], None]) -> processes.Process:
    from kopf_outcomes_testing.cluster import pki  # cryptography: only when starting one

    certs = pki.files(folder / "pki")  # the API server's 127.0.0.1 certificate serves here too
    port = processes.free_ports(1)[0]
    kubeconfig = str(info.admin_kubeconfig)
    started = time.monotonic()
    progress(f"starting {NAME} ({', '.join(CONTROLLERS)}) on https://127.0.0.1:{port}")
    process = processes.spawn(NAME, [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",  # who may read its /metrics: the admin
        # The API server has no client CA, so it publishes none (extension-apiserver-
        # authentication): looking for it would log an error, again and again, forever.
        "--authentication-skip-lookup",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--controllers={','.join(CONTROLLERS)}",
        "--use-service-account-credentials=false",  # no service-account token controller here
        "--leader-elect=false",  # one instance per control plane: no lease to wait for
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={certs.serving_cert}",
        f"--tls-private-key-file={certs.serving_key}",
    ], folder / f"{NAME}.log", port)
    health = RestClient(f"https://127.0.0.1:{port}", ca, None, timeout=2.0)
    try:
        processes.wait_until(process, lambda: _healthy(health), timeout=timeout,
                             deadline=started + timeout)
    except BaseException:
        processes.stop(process)
        raise
    progress(f"{NAME} ready in {time.monotonic() - started:.1f}s")
    return process


def _healthy(health: RestClient) -> bool:
    try:
        status, _ = health.request("GET", "/healthz")
    except OSError:  # not listening yet
        return False
    return status == 200
