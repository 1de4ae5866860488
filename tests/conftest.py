"""Fixtures shared by tests of several folders."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def dist_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every distribution's wheel, built once per session by ``scripts/dist`` (about 30 s): what
    the pages call ``~/kopf-outcomes/dist``, for the tests that replay them."""
    wheels = tmp_path_factory.mktemp("dist")
    built = subprocess.run([ROOT / "scripts" / "dist", wheels], capture_output=True, text=True, check=True)
    assert built.stdout.strip() == str(wheels)
    return wheels
