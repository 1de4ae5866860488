"""Programs the tests run that Python does not bring: found on PATH, or where ./scripts/test
builds them when it cannot install Debian's package (no root). Missing, a test fails saying how
to get it: a skipped check would pass for a checked one."""
from __future__ import annotations

import os
import shutil

import pytest

from kopf_outcomes_testing.cluster.binaries import prometheus_dir

# Where each program comes from besides PATH, and how to get it.
_BUILT = {"promtool": prometheus_dir, "prometheus": prometheus_dir}


def program(name: str) -> str:
    """The path of ``name`` (promtool, prometheus), or the test fails naming how to get it."""
    found = shutil.which(name)
    if found is None and name in _BUILT:
        found = shutil.which(name, path=str(_BUILT[name]()))
    if found is None and name in _BUILT:
        pytest.fail(f"{name} is not installed: ./scripts/test installs it (Debian's prometheus package"
                    " as root, else a Go build: kopf-outcomes cluster build --prometheus)")
    if found is None:
        pytest.fail(f"{name} is not installed, and the test runs it")
    return found


def path_with(*names: str) -> str:
    """A PATH on which each of these programs is found, for commands that run them by name."""
    folders = dict.fromkeys(os.path.dirname(program(name)) for name in names)
    return os.pathsep.join([*folders, os.environ.get("PATH", "")])
