"""
What every scenario needs: names, progress on stderr, statistics, and facts about the machine.

The rest is split by idea: ``kube`` (the API client, namespaces, bulk operations), ``retries``
(how every API call is retried), ``mirror`` (a watch-fed view of the objects), ``process``
(operators as ``kopf run`` subprocesses).
"""
from __future__ import annotations

import datetime
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GROUP, VERSION, PLURAL = "kopf.dev", "v1", "kopfexamples"
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
MERGE_PATCH = "application/merge-patch+json"
HANDLER_ID = "delete_fn"


def say(message: str) -> None:
    """Progress on stderr, so that stdout carries only the table."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- statistics ---------------------------------------------------------------------------------

def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linearly interpolated between the closest ranks."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def distribution(values: Sequence[float]) -> dict[str, Any]:
    """p50/p95/p99, min, max and mean of latencies in seconds; the raw samples too."""
    return {
        "n": len(values),
        "p50_s": percentile(values, 50),
        "p95_s": percentile(values, 95),
        "p99_s": percentile(values, 99),
        "min_s": min(values) if values else math.nan,
        "max_s": max(values) if values else math.nan,
        "mean_s": sum(values) / len(values) if values else math.nan,
        "samples_s": [round(v, 4) for v in values],
    }


def ratio(ours: float | None, stock: float | None) -> float | None:
    """ours / stock (lower is better everywhere in the report); None where undefined."""
    if ours is None or stock is None or stock == 0 or math.isnan(ours) or math.isnan(stock):
        return None
    return ours / stock


# --- facts about the machine and the software -----------------------------------------------------

def machine_info() -> dict[str, Any]:
    meminfo = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else ""
    total_kib = next((int(line.split()[1]) for line in meminfo.splitlines()
                      if line.startswith("MemTotal:")), 0)
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                  if line.startswith("model name")), platform.processor())
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count() or 0
    return {
        "nproc": usable,
        "cpu_model": model,
        "memory_gib": round(total_kib / 1024 / 1024, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "kopf": metadata.version("kopf"),
        "kopf_outcomes": metadata.version("kopf-outcomes"),
        "kubernetes_asyncio": metadata.version("kubernetes_asyncio"),
        "git_commit": _git_commit(),
        "git_modified": _git_modified(),
    }


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _git_modified() -> list[str]:
    """Library files changed in the working tree: what was measured, beyond the commit."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", "src", "examples"], cwd=ROOT,
                             text=True, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return sorted(line[3:] for line in out.splitlines() if line.strip())


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
