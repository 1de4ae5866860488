"""Fixtures shared by tests of several folders."""
from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import kopf_outcomes

ROOT = Path(__file__).resolve().parents[1]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Collecting imports every test module: one that installs kopf-outcomes on import (an operator's
    module imported for a constant) would patch Kopf under every later test."""
    if kopf_outcomes.is_installed():
        raise pytest.UsageError("a test module installed kopf-outcomes when it was imported (collection)")


@pytest.fixture(autouse=True)
def _leaves_kopf_unpatched() -> Iterator[None]:
    """A test that installs kopf-outcomes in this process uninstalls it: a patch left behind would
    run every later test on a patched Kopf (four policy tests were skipped for it in a full run)."""
    before = kopf_outcomes.is_installed()
    yield
    if not before and kopf_outcomes.is_installed():
        kopf_outcomes.uninstall()
        pytest.fail("the test left kopf-outcomes installed in this process: uninstall it", pytrace=False)


@pytest.fixture(scope="session")
def dist_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every distribution's wheel, built once per session by ``scripts/dist`` (about 30 s): what
    the pages call ``~/kopf-outcomes/dist``, for the tests that replay them."""
    wheels = tmp_path_factory.mktemp("dist")
    built = subprocess.run([ROOT / "scripts" / "dist", wheels], capture_output=True, text=True, check=True)
    assert built.stdout.strip() == str(wheels)
    return wheels
