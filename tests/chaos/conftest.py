"""
The chaos suite runs only when asked: ``KOPF_OUTCOMES_CHAOS=full`` (tox -e chaos) or ``=quick``
(CI); otherwise its tests are deselected, so that the normal test run stays as fast as it was.
It reuses the end-to-end fixtures (the real API server, a namespace, operator processes).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.chaos.helpers import REPORT_DIR, Figures
from tests.e2e.conftest import api, cluster, namespace, objects, operator  # noqa: F401 -- fixtures

HERE = Path(__file__).parent
_reported: list[Figures] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("KOPF_OUTCOMES_CHAOS") in ("full", "quick"):
        return
    chaos = [item for item in items if HERE in item.path.parents]
    if chaos:
        config.hook.pytest_deselected(items=chaos)
        items[:] = [item for item in items if item not in chaos]


@pytest.fixture()
def report() -> Figures:
    """Figures of one scenario; the test writes them before asserting on them (shown at the end)."""
    figures = Figures(scenario="?", seed=0)
    _reported.append(figures)
    return figures


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for figures in _reported:
        path = REPORT_DIR / f"{figures.scenario}.json"
        if figures.scenario != "?" and path.exists():
            terminalreporter.write_sep("-", f"chaos: {figures.scenario} (seed {figures.seed}), {path}")
            terminalreporter.write_line(path.read_text())
