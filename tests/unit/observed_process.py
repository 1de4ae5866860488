"""The review files' one set-up: kopf-outcomes installed with the failing-as-armed observer of
:mod:`.test_review_restructure`, and each test a new process (this process's conclusions and the
releases said to wait forgotten). Imported by a test module, the fixture applies to its tests."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

import kopf_outcomes
from kopf_outcomes._kopf import retentions, unrecorded
from tests.unit.test_review_restructure import Observer


@pytest.fixture(autouse=True)
def installed(unpatched: None) -> Iterator[None]:
    kopf_outcomes.install(entry_points=False, events=False, plugins=[Observer()])
    Observer.armed, Observer.told = {}, []
    unrecorded._final.clear()
    retentions._SAID.clear()
    yield
    unrecorded._final.clear()
