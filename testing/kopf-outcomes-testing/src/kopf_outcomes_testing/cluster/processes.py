"""Start, watch and stop the server processes, killing only what we verifiably started.

A recorded pid is trusted only while the process still runs the command line we started it
with: after a reboot or a crash the pid may belong to somebody else. psutil reads command lines
and signals processes wherever Python runs (Linux, macOS, BSD), so that ``cluster down`` from a
new shell finds the servers that another one started.
"""
from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from kopf_outcomes_testing.cluster.errors import ClusterError, log_tail

PORT_IN_USE = "address already in use"

# Children started by this Python process, so that their exit status is collected (no zombies).
_children: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class Process:
    """A started server: enough to find it again from another process and to stop it."""

    name: str
    pid: int
    argv: tuple[str, ...]
    log: Path
    port: int


class PortTaken(ClusterError):
    """A port was free when chosen but taken before the server bound it (or was given taken)."""


def spawn(name: str, argv: list[str], log: Path, port: int) -> Process:
    """Start a server detached from our terminal and session, its output going to ``log``."""
    with log.open("ab") as out:
        popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                 start_new_session=True, close_fds=True)
    _children[popen.pid] = popen
    return Process(name=name, pid=popen.pid, argv=tuple(argv), log=log, port=port)


def is_ours(process: Process) -> bool:
    """Whether the pid is alive and still runs exactly the command line we started."""
    popen = _children.get(process.pid)
    if popen is not None:  # our own child: certain, even while it is still exec-ing
        if popen.poll() is None:
            return True
        del _children[process.pid]
        return False
    return _find(process) is not None


def _find(process: Process) -> psutil.Process | None:
    """The live process with that pid and our command line, or None."""
    try:
        found = psutil.Process(process.pid)
        if found.status() == psutil.STATUS_ZOMBIE:
            return None
        cmdline = found.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    # A suffix, not equality: a script (e.g. in KUBEBUILDER_ASSETS) runs as `interpreter argv...`.
    return found if cmdline[-len(process.argv):] == list(process.argv) else None


def stop(process: Process, *, grace: float = 10.0) -> None:
    """SIGTERM (then SIGKILL after ``grace``) the process, if it is still the one we started."""
    popen = _children.pop(process.pid, None)
    if popen is not None:
        if popen.poll() is None:
            popen.terminate()
            try:
                popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()
        return
    found = _find(process)
    if found is None:
        return
    try:
        found.terminate()
        _, alive = psutil.wait_procs([found], timeout=grace)
        for survivor in alive:
            survivor.kill()
        psutil.wait_procs(alive, timeout=grace)
    except psutil.NoSuchProcess:
        pass


def wait_until(process: Process, check: Callable[[], bool], *, deadline: float,
               timeout: float) -> None:
    """Poll ``check`` until it passes; fail early if the process dies, with its log's tail."""
    while not check():
        popen = _children.get(process.pid)
        if not is_ours(process):
            code = popen.wait() if popen is not None else None
            text = _read(process.log)
            details = log_tail(text, title=str(process.log))
            if PORT_IN_USE in text.lower():
                raise PortTaken(
                    f"{process.name} could not listen on 127.0.0.1:{process.port}:"
                    " the port is already in use",
                    "another program took the port; retry, or pass other ports", details)
            raise ClusterError(
                f"{process.name} exited with code {code} while starting",
                f"see why in its log {process.log}", details)
        if time.monotonic() > deadline:
            raise ClusterError(
                f"{process.name} was not ready within {timeout:.0f}s",
                f"see its log {process.log}; on a slow machine, raise --timeout",
                log_tail(_read(process.log), title=str(process.log)))
        time.sleep(0.1)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def free_ports(count: int) -> list[int]:
    """Distinct ports free on 127.0.0.1 right now (held together so they differ)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(s)
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def check_port_free(port: int, *, what: str) -> None:
    """Fail clearly before starting anything if a requested port is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers themselves do
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            raise PortTaken(f"the {what} port 127.0.0.1:{port} is not available: {e.strerror}",
                            "stop the program using it, or pick another port"
                            " (or none, to choose free ones)") from None
