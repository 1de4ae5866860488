"""The histories build their operator's plugins and policy themselves: nothing from outside."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KOPF_OUTCOMES_PLUGINS", "KOPF_OUTCOMES_DISABLE_PLUGINS", "KOPF_OUTCOMES_POLICY",
                 "KOPF_OUTCOMES_EVENTS"):
        monkeypatch.delenv(name, raising=False)
