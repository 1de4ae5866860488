"""An advisory file lock, so that concurrent ``cluster up`` calls or builds do not collide.

Two terminals, a CLI call and a pytest session, or two test sessions may all ask for the
cluster at the same time; one of them starts it, the others wait and then find it running.
"""
from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing) for the duration."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
