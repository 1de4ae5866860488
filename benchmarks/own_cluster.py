"""
A control plane of the benchmark's own, whose audit log has every request (reads and watches
too): the shared one logs writes only, and others run tests on it, so it is neither restarted
nor reconfigured. Its own state folder (``$KOPF_OUTCOMES_STATE_DIR``), its own ports; stopped at
the end. The binaries are the shared cache's.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TypeVar

from benchmarks.common import say
from benchmarks.process import cpu_seconds
from kopf_outcomes_testing.cluster import ClusterInfo, ensure_running, stop
from kopf_outcomes_testing.cluster.paths import STATE_DIR_ENV, cache_root

T = TypeVar("T")
SERVERS = ("etcd", "kube-apiserver")


@contextlib.contextmanager
def _state_dir(folder: Path) -> Iterator[None]:
    previous = os.environ.get(STATE_DIR_ENV)
    os.environ[STATE_DIR_ENV] = str(folder)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(STATE_DIR_ENV, None)
        else:
            os.environ[STATE_DIR_ENV] = previous


def _in(folder: Path, fn: Callable[[], T]) -> T:
    with _state_dir(folder):
        return fn()


@contextlib.asynccontextmanager
async def every_request_audited(name: str) -> AsyncIterator[ClusterInfo]:
    """A fresh cluster in ``~/.cache/kopf-outcomes/<name>``, auditing every request; stopped after."""
    folder = cache_root() / name
    try:
        yield await asyncio.to_thread(_in, folder, lambda: ensure_running(audit="requests", progress=say))
    finally:
        await asyncio.to_thread(_in, folder, stop)


def servers_cpu_seconds(cluster: ClusterInfo) -> dict[str, float]:
    """CPU seconds so far of the cluster's etcd and kube-apiserver (their pids from its state file)."""
    assert cluster.state_dir is not None
    state = json.loads((cluster.state_dir / "state.json").read_text())
    return {p["name"]: cpu_seconds(int(p["pid"])) for p in state["processes"] if p["name"] in SERVERS}
