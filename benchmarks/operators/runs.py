"""Count handler runs outside the API: one line per run in ``$BENCH_RUNS_FILE``, if it is set.

Kopf's retry counter in the object counts only runs that were written back; a run that
changes nothing (a restart's re-run, a recheck without writes) would go unseen there.
"""
from __future__ import annotations

import os
from pathlib import Path

_FILE = os.environ.get("BENCH_RUNS_FILE")


def record(name: str) -> None:
    if _FILE:
        with open(_FILE, "a") as f:
            f.write(f"{name}\n")


def count(path: str | Path) -> int:
    """The runs recorded so far (0 if none yet)."""
    try:
        with open(path) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0
