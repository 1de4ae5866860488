"""Operators as ``kopf run`` subprocesses, observed from outside: alive, memory, CPU time."""
from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from benchmarks.common import ROOT, say
from benchmarks.operators.runs import count as count_runs

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class Operator:
    """``kopf run --standalone --namespace NS FILE`` at Kopf's default log level (INFO).

    The benchmark operators record each handler run in ``$BENCH_RUNS_FILE``: :meth:`runs`.
    """

    def __init__(self, path: str | Path, namespace: str, *, kubeconfig: str | Path,
                 env: Mapping[str, str] | None = None, label: str = "operator",
                 extra_args: Sequence[str] = ()) -> None:
        self.path = ROOT / path
        self.namespace = namespace
        self.kubeconfig = str(kubeconfig)
        self.env = dict(env or {})
        self.label = label
        self.extra_args = list(extra_args)
        self._log: IO[str] = tempfile.NamedTemporaryFile(
            "w+", prefix=f"bench-{label}-", suffix=".log", delete=False)
        self.process: subprocess.Popen[str] | None = None

    @property
    def log_path(self) -> str:
        return self._log.name

    @property
    def runs_path(self) -> str:
        return self._log.name + ".runs"

    def runs(self) -> int:
        """Handler runs so far, as recorded by the operator itself (benchmarks/operators/runs.py)."""
        return count_runs(self.runs_path)

    async def __aenter__(self) -> Operator:
        env = dict(os.environ, KUBECONFIG=self.kubeconfig, PYTHONPATH=str(ROOT),
                   # Plugins installed in this environment stay out: the library alone is measured.
                   KOPF_OUTCOMES_PLUGINS="", BENCH_RUNS_FILE=self.runs_path, **self.env)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kopf", "run", "--standalone", "--namespace", self.namespace,
             *self.extra_args, str(self.path)],
            stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=ROOT, text=True,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)  # Kopf may take seconds to stop; the watches go on
        if exc[0] is None:
            for path in (self._log.name, self.runs_path):
                with contextlib.suppress(OSError):
                    os.unlink(path)
        else:
            say(f"the {self.label} operator's log is kept at {self._log.name}")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"the {self.label} operator exited ({self.process.returncode}):\n"
                               f"{self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        self._log.flush()
        return Path(self._log.name).read_text(errors="replace")[-chars:]

    def status_kib(self, field: str) -> int:
        """A memory figure from /proc/<pid>/status, e.g. VmRSS or VmHWM, in KiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
        raise KeyError(field)

    def cpu_seconds(self) -> float:
        """CPU time of the process so far: :func:`cpu_seconds`."""
        return cpu_seconds(self.pid)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def cpu_seconds(pid: int) -> float:
    """CPU time of a process so far, in nanoseconds' precision where the kernel keeps it:
    the time on CPU of each of its threads (``/proc/<pid>/task/*/schedstat``, first field),
    summed. Else utime + stime, in clock ticks (10 ms: too coarse for an idle minute, in which
    an operator uses about ten of them)."""
    total_ns, found = 0, False
    for path in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total_ns += int(path.read_text().split()[0])
            found = True
        except (OSError, ValueError, IndexError):  # a thread that ended meanwhile
            continue
    if found:
        return total_ns / 1e9
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # fields 14 and 15 of stat(5)
