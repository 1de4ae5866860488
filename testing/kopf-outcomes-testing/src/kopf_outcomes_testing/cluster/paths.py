"""Where the control plane keeps its binaries and its running state, outside the repository."""
from __future__ import annotations

import os
from pathlib import Path

STATE_DIR_ENV = "KOPF_OUTCOMES_STATE_DIR"


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/kopf-outcomes`` (``~/.cache/kopf-outcomes``): shared by all checkouts."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kopf-outcomes"


def state_dir() -> Path:
    """The running cluster's certificates, tokens, etcd data, logs and pids."""
    explicit = os.environ.get(STATE_DIR_ENV)
    return Path(explicit) if explicit else cache_root() / "cluster"
