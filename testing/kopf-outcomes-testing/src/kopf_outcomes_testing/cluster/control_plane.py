"""Bring the local control plane up, find it again, and take it down.

One control plane per state folder (``$KOPF_OUTCOMES_STATE_DIR``, by default
``~/.cache/kopf-outcomes/cluster``): it outlives the command that started it, so that test
sessions and demos reuse it, and every user of the folder sees the same cluster.

kube-controller-manager runs only when asked for (``controllers=True``): it is started next to
an already running API server if missing, and recorded with the servers so that ``stop()``
takes it down too. Who does not ask for it never needs its binary.
"""
from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kopf_outcomes_testing.cluster import binaries, controllers, paths, processes, resources
from kopf_outcomes_testing.cluster.api import RestClient
from kopf_outcomes_testing.cluster.errors import ClusterError
from kopf_outcomes_testing.cluster.info import AUDIT_LOG, ClusterInfo
from kopf_outcomes_testing.cluster.kubeconfig import write_kubeconfig
from kopf_outcomes_testing.cluster.locks import file_lock

Progress = Callable[[str], None]
Audit = Literal["writes", "requests"]

DEFAULT_TIMEOUT = 60.0
PORT_ATTEMPTS = 3  # free ports can be taken by others between choosing and binding them
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"


def _silent(message: str) -> None:
    """The default progress reporter of the Python API: say nothing."""


@dataclass(frozen=True)
class _State:
    """What ``state.json`` records: the processes always, the access data once ready."""

    processes: tuple[processes.Process, ...]
    info: ClusterInfo | None


def ensure_running(*, apiserver_port: int | None = None, etcd_port: int | None = None,
                   timeout: float = DEFAULT_TIMEOUT, progress: Progress = _silent,
                   build: bool = True, controllers: bool = False, audit: Audit = "writes") -> ClusterInfo:
    """Return the running, healthy cluster, starting it first if needed (building if needed).

    The ports apply only when starting; by default free ones are chosen. With ``build=False``,
    missing binaries raise :class:`~kopf_outcomes_testing.cluster.binaries.BinariesMissing`.
    With ``controllers=True``, kube-controller-manager (garbage collection, namespace deletion)
    runs too, started next to a running cluster if it is not there yet.
    ``audit="requests"`` logs every request (reads and watches too), not only the writes: for a
    cluster of its own (``$KOPF_OUTCOMES_STATE_DIR``); a running one that logs less is an error.
    Raises :class:`ClusterError` with a cause and a hint for anything the user can fix.
    """
    folder = paths.state_dir()
    with file_lock(_lock_path(folder)):
        state = _read_state(folder)
        if state is not None and state.info is not None and _healthy(state):
            _check_audit(folder, audit)
            resources.install(state.info.admin_client(), state.info.restricted_client(),
                              timeout=timeout)
        else:
            if state is not None:
                progress("found a stopped or broken cluster; cleaning it up")
                _stop_all(state)
            for port, what in ((apiserver_port, "kube-apiserver"), (etcd_port, "etcd client")):
                if port is not None:
                    processes.check_port_free(port, what=what)
            found = binaries.find_binaries(progress, build=build)
            if controllers:  # missing or failing to build: before anything starts
                binaries.find_controller_manager(progress, build=build)
            state = _start_retrying(folder, found, apiserver_port, etcd_port, timeout, progress, audit)
        if controllers:
            state = _with_controllers(folder, state, timeout, progress, build=build)
        assert state.info is not None  # healthy or just started: its access data is recorded
        return state.info


def controllers_running() -> bool:
    """Whether the running cluster has kube-controller-manager (``ensure_running(controllers=True)``)."""
    state = _read_state(paths.state_dir())
    return (state is not None and _healthy(state)
            and any(processes.is_ours(p) for p in _controller_managers(state)))


def _start_retrying(folder: Path, found: binaries.Binaries, apiserver_port: int | None,
                    etcd_port: int | None, timeout: float, progress: Progress, audit: Audit) -> _State:
    """:func:`_start` again with other free ports when one was taken meanwhile (not given ones)."""
    fixed_ports = apiserver_port is not None or etcd_port is not None
    attempt = 1
    while True:
        try:
            return _start(folder, found, apiserver_port, etcd_port, timeout, progress, audit)
        except processes.PortTaken:
            if fixed_ports or attempt == PORT_ATTEMPTS:
                raise
            attempt += 1
            progress("a chosen port was taken meanwhile; retrying with other ports")


def _with_controllers(folder: Path, state: _State, timeout: float, progress: Progress, *,
                      build: bool) -> _State:
    """The state with a live kube-controller-manager: the recorded one, or one started now."""
    assert state.info is not None
    if any(processes.is_ours(p) for p in _controller_managers(state)):
        return state
    binary = binaries.find_controller_manager(progress, build=build)
    started = controllers.start(binary, state.info, timeout=timeout, progress=progress)
    servers = tuple(p for p in state.processes if p.name != controllers.NAME)  # not a dead one
    state = _State((*servers, started), state.info)  # last: stopped first
    _write_state(folder, state)
    return state


def _controller_managers(state: _State) -> list[processes.Process]:
    return [p for p in state.processes if p.name == controllers.NAME]


def running() -> ClusterInfo | None:
    """The running cluster's access data, if it is up and answers ``/readyz``; else None."""
    state = _read_state(paths.state_dir())
    if state is None or state.info is None or not _healthy(state):
        return None
    return state.info


def stop() -> bool:
    """Stop the processes this state folder started and delete the folder; False if none ran."""
    folder = paths.state_dir()
    with file_lock(_lock_path(folder)):
        state = _read_state(folder)
        if state is not None:
            _stop_all(state)
        existed = folder.exists()
        shutil.rmtree(folder, ignore_errors=True)
        return state is not None or existed


def _lock_path(folder: Path) -> Path:
    return folder.with_name(folder.name + ".lock")  # outside the folder, which `down` removes


def _start(folder: Path, found: binaries.Binaries, apiserver_port: int | None,
           etcd_port: int | None, timeout: float, progress: Progress, audit: Audit = "writes") -> _State:
    """Start etcd, then kube-apiserver; on any failure stop whatever was started."""
    from kopf_outcomes_testing.cluster import pki  # cryptography: only when starting one

    started = time.monotonic()
    deadline = started + timeout
    shutil.rmtree(folder, ignore_errors=True)  # a fresh cluster: new keys, tokens, data
    folder.mkdir(parents=True)
    certs = pki.generate(folder / "pki")
    tokens = {"admin": secrets.token_urlsafe(24), "restricted": secrets.token_urlsafe(24)}
    token_file = folder / "tokens.csv"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:  # token,user,uid[,"groups"]
        f.write(f'{tokens["admin"]},admin,admin,"system:masters"\n')
        f.write(f'{tokens["restricted"]},{resources.RESTRICTED_USER},{resources.RESTRICTED_USER}\n')

    auto = [p for p in processes.free_ports(5) if p not in (apiserver_port, etcd_port)]
    client_port = etcd_port or auto[0]
    peer_port = auto[1]
    api_port = apiserver_port or auto[2]
    server = f"https://127.0.0.1:{api_port}"
    etcd_url = f"http://127.0.0.1:{client_port}"
    peer_url = f"http://127.0.0.1:{peer_port}"

    running_now: list[processes.Process] = []
    try:
        progress(f"starting etcd on {etcd_url}")
        etcd = processes.spawn("etcd", [
            str(found.etcd),
            "--name=kopf-outcomes",
            f"--data-dir={folder / 'etcd-data'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=kopf-outcomes={peer_url}",
            "--unsafe-no-fsync",  # a throw-away test cluster: speed over durability
        ], folder / "etcd.log", client_port)
        running_now.append(etcd)
        _write_state(folder, _State(tuple(running_now), None))
        processes.wait_until(etcd, lambda: _etcd_healthy(etcd_url), deadline=deadline,
                             timeout=timeout)

        progress(f"starting kube-apiserver on {server}")
        apiserver = processes.spawn("kube-apiserver", [
            str(found.kube_apiserver),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--tls-cert-file={certs.serving_cert}",
            f"--tls-private-key-file={certs.serving_key}",
            f"--token-auth-file={token_file}",
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={certs.service_account_pub}",
            f"--service-account-signing-key-file={certs.service_account_key}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            "--disable-admission-plugins=ServiceAccount",  # no controller-manager makes tokens
            "--allow-privileged=true",
            # Every write (or request), as JSON lines: how tests and benchmarks count API calls per client.
            f"--audit-policy-file={_audit_policy(folder, audit)}",
            f"--audit-log-path={folder / AUDIT_LOG}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
        ], folder / "kube-apiserver.log", api_port)
        running_now.append(apiserver)
        _write_state(folder, _State(tuple(running_now), None))
        admin = RestClient(server, certs.ca_cert, tokens["admin"], timeout=2.0)
        processes.wait_until(apiserver, lambda: _apiserver_ready(admin), deadline=deadline,
                             timeout=timeout)

        ca_pem = certs.ca_cert.read_bytes()
        admin_kubeconfig = folder / "admin.kubeconfig"
        restricted_kubeconfig = folder / "restricted.kubeconfig"
        info = ClusterInfo(
            server=server,
            ca_path=certs.ca_cert,
            admin_token=tokens["admin"],
            restricted_token=tokens["restricted"],
            admin_kubeconfig=admin_kubeconfig,
            restricted_kubeconfig=restricted_kubeconfig,
            state_dir=folder,
        )
        write_kubeconfig(admin_kubeconfig, server=server, ca_pem=ca_pem, user="admin",
                         token=tokens["admin"])
        write_kubeconfig(restricted_kubeconfig, server=server, ca_pem=ca_pem,
                         user=resources.RESTRICTED_USER, token=tokens["restricted"])
        progress("installing the example CRD and the restricted user's RBAC")
        resources.install(info.admin_client(), info.restricted_client(),
                          timeout=max(1.0, deadline - time.monotonic()))
        state = _State(tuple(running_now), info)
        _write_state(folder, state)
    except BaseException:
        for process in reversed(running_now):
            processes.stop(process)
        _remove_state_file(folder)
        raise
    progress(f"cluster ready in {time.monotonic() - started:.1f}s at {server}")
    return state


_AUDIT_POLICIES: dict[Audit, str] = {
    "writes": """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
  - level: Metadata
    verbs: ["create", "update", "patch", "delete", "deletecollection"]
  - level: None
""",
    # A watch is logged when its response starts, and again when it ends (if it ends): one auditID.
    "requests": """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    users: ["system:apiserver"]
  - level: Metadata
""",
}


def _audit_policy(folder: Path, audit: Audit) -> Path:
    path = folder / "audit-policy.yaml"
    path.write_text(_AUDIT_POLICIES[audit])
    return path


def _check_audit(folder: Path, audit: Audit) -> None:
    """A running cluster keeps the policy it started with: one that logs less cannot serve."""
    if audit == "writes":
        return  # every policy logs the writes
    path = folder / "audit-policy.yaml"
    if not path.exists() or path.read_text() != _AUDIT_POLICIES[audit]:
        raise ClusterError(f"the cluster of {folder} does not log every request in its audit log",
                           "use a state folder of its own ($KOPF_OUTCOMES_STATE_DIR), or stop that cluster")


def _etcd_healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=1.0) as resp:
            return bool(json.loads(resp.read()).get("health") == "true")
    except (OSError, ValueError):
        return False


def _apiserver_ready(admin: RestClient) -> bool:
    try:
        status, _ = admin.request("GET", "/readyz")
    except OSError:  # not listening yet, or a TLS handshake cut short during start-up
        return False
    return status == 200


def _healthy(state: _State) -> bool:
    """Whether etcd and kube-apiserver run and answer; a dead controller manager is restartable."""
    return (state.info is not None
            and all(processes.is_ours(p) for p in state.processes if p.name != controllers.NAME)
            and _apiserver_ready(state.info.admin_client()))


def _stop_all(state: _State) -> None:
    for process in reversed(state.processes):
        processes.stop(process)


def _state_path(folder: Path) -> Path:
    return folder / "state.json"


def _write_state(folder: Path, state: _State) -> None:
    data: dict[str, Any] = {
        "processes": [{**dataclasses.asdict(p), "log": str(p.log)} for p in state.processes],
        "info": None if state.info is None else {
            k: str(v) for k, v in dataclasses.asdict(state.info).items() if v is not None},
    }
    path = _state_path(folder)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds the tokens
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, path)


def _read_state(folder: Path) -> _State | None:
    try:
        data = json.loads(_state_path(folder).read_text())
        procs = tuple(
            processes.Process(name=p["name"], pid=int(p["pid"]), argv=tuple(p["argv"]),
                              log=Path(p["log"]), port=int(p["port"]))
            for p in data["processes"])
        raw = data["info"]
        info = None if raw is None else ClusterInfo(
            server=raw["server"], ca_path=Path(raw["ca_path"]),
            admin_token=raw["admin_token"], restricted_token=raw["restricted_token"],
            admin_kubeconfig=Path(raw["admin_kubeconfig"]),
            restricted_kubeconfig=Path(raw["restricted_kubeconfig"]),
            state_dir=Path(raw["state_dir"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return _State(procs, info)


def _remove_state_file(folder: Path) -> None:
    _state_path(folder).unlink(missing_ok=True)
