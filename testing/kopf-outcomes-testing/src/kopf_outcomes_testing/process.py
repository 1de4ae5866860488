"""
A Kopf operator as a real process (``kopf run``), with its JSON log read back as records.

Tests that claim behaviour (log levels, finalizers, restarts) run the operator the way users
do; a real process can also be killed with SIGKILL in the middle of its work.

    async with OperatorProcess("example.py", namespace, kubeconfig=path) as op:
        ...
        record = await op.wait_for(lambda r: "is pending" in r.message)
"""
from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

# Kopf's JSON log says "warn"; the tests speak the logging module's names.
_LEVELS = {"DEBUG": "DEBUG", "INFO": "INFO", "WARN": "WARNING", "WARNING": "WARNING", "ERROR": "ERROR",
           "CRITICAL": "CRITICAL", "FATAL": "CRITICAL"}


@dataclasses.dataclass(frozen=True)
class Record:
    """One log line of the operator."""

    time: float
    level: str
    message: str
    object: str | None  # "namespace/name" for per-object records

    @classmethod
    def parse(cls, line: str) -> Record | None:
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            return None
        if not isinstance(data, dict) or "message" not in data:
            return None
        ref = data.get("object") or {}
        obj = f"{ref.get('namespace')}/{ref.get('name')}" if ref.get("name") else None
        moment = datetime.datetime.fromisoformat(str(data["timestamp"])).timestamp()
        return cls(time=moment, level=_LEVELS.get(str(data.get("severity", "")).upper(), "?"),
                   message=str(data["message"]), object=obj)


class OperatorProcess:
    """``kopf run --standalone --namespace NS`` on a file, logging JSON to a temp file."""

    def __init__(self, path: str | Path, namespace: str, *, kubeconfig: str,
                 env: Mapping[str, str] | None = None, extra_args: Sequence[str] = (),
                 cwd: str | Path | None = None, python: str | Path = sys.executable) -> None:
        self.path = Path(path)
        self.python = str(python)  # another virtualenv's, e.g. to run an operator as installed
        self.namespace = namespace
        self.kubeconfig = kubeconfig
        self.env = dict(env or {})
        self.extra_args = list(extra_args)
        self.cwd = Path(cwd) if cwd is not None else Path.cwd()
        self._log: IO[str] = tempfile.NamedTemporaryFile("w+", prefix="operator-", suffix=".log")
        self._process: subprocess.Popen[str] | None = None

    async def start(self) -> OperatorProcess:
        pythonpath = os.pathsep.join(filter(None, [str(self.cwd), os.environ.get("PYTHONPATH")]))
        env = dict(os.environ, KUBECONFIG=self.kubeconfig, PYTHONPATH=pythonpath, **self.env)
        self._process = subprocess.Popen(
            [self.python, "-m", "kopf", "run", "--standalone", "--namespace", self.namespace,
             "--verbose", "--log-format=json", "--log-refkey=object", *self.extra_args, str(self.path)],
            stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=self.cwd, text=True,
        )
        try:
            await self.wait_for(lambda r: r.message.startswith("Starting the watch-stream for "),
                                timeout=30, what="the operator to start")
        except BaseException:
            self.kill()  # a failed start leaves no operator behind
            raise
        return self

    async def __aenter__(self) -> OperatorProcess:
        return await self.start()

    async def __aexit__(self, *_: object) -> None:
        self.stop()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(sig)
            try:
                self._process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def kill(self) -> None:
        """SIGKILL: no cleanup, no last patch — as when a node dies."""
        self.stop(signal.SIGKILL)

    def text(self) -> str:
        self._log.flush()
        return Path(self._log.name).read_text()

    def records(self, obj: str | None = None) -> list[Record]:
        parsed = (Record.parse(line) for line in self.text().splitlines())
        return [r for r in parsed if r is not None and (obj is None or r.object == obj)]

    async def wait_for(self, predicate: Callable[[Record], bool], *, timeout: float = 20,
                 what: str = "a log record") -> Record:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for record in self.records():
                if predicate(record):
                    return record
            if self._process is not None and self._process.poll() is not None:
                raise AssertionError(f"the operator exited ({self._process.returncode}) while waiting "
                                     f"for {what}:\n{self.text()[-3000:]}")
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}:\n{self.text()[-3000:]}")


def summary(records: Sequence[Record]) -> list[tuple[str, str]]:
    """(level, message) pairs, for readable assertion failures."""
    return [(r.level, r.message) for r in records]

