"""Regressions: bugs the unit tests found, fixed in the library."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import Pending, Retry, handler_options, memory
from kopf_outcomes._kopf.marks import PARKED_DELAY
from kopf_outcomes.memory import MEMORY_ANNOTATION
from tests.unit.conftest import Collector
from tests.unit.kopf_objects import Reason, changing_cause, handler, parked_state, run_handlers


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(memory, "_reported_garbage", type(memory._reported_garbage)())
    kopf_outcomes.uninstall()
    yield
    kopf_outcomes.uninstall()


# Bug 1: memory.read() raises TypeError for unhashable non-string garbage.
@pytest.mark.parametrize("raw", [["a list"], {"h": {"digest": "d", "outcome": "pending", "reason": ""}}],
                         ids=["list", "dict"])
def test_read_unhashable_garbage_is_no_memory(raw: Any, logger: logging.Logger,
                                              collector: Collector) -> None:
    body = {"metadata": {"uid": "u", "annotations": {MEMORY_ANNOTATION: raw}}}
    assert memory.read(body, logger) == {}
    assert memory.read(body, logger) == {}
    assert len(collector.messages(logging.WARNING)) == 1


# Bug 2: handler_options(fatal_on_delete="retain") is ignored for kopf.PermanentError
# when no plugin/policy is registered (the hot path in patch.invoke_handler re-raises).
async def test_permanent_error_is_retained_by_the_option_without_plugins(logger: logging.Logger) -> None:
    kopf_outcomes.install(entry_points=False)

    async def fn(**_: Any) -> None:
        raise kopf.PermanentError("broken")

    handler_options(fatal_on_delete="retain")(fn)
    cause = changing_cause({"metadata": {"name": "n", "uid": "u"}}, logger, reason=Reason.DELETE)
    outcomes = await run_handlers([handler(fn)], cause)
    assert outcomes["h"].final is False
    assert outcomes["h"].delay == PARKED_DELAY


# Bug 3: infinite (or huge) recheck/delay pass validation, but Kopf cannot store them.
@pytest.mark.parametrize("make", [lambda: Pending("x", recheck=math.inf),
                                  lambda: Retry("x", delay=math.inf),
                                  lambda: Retry("x", delay=1e15)], ids=["recheck-inf", "delay-inf", "delay-1e15"])
async def test_non_finite_delays_are_rejected_or_storable(make: Any, logger: logging.Logger) -> None:
    try:
        outcome = make()
    except (ValueError, TypeError):
        return  # rejected at construction with a clear message: fine
    kopf_outcomes.install(entry_points=False)

    async def fn(**_: Any) -> Any:
        return outcome

    h = handler(fn)
    cause = changing_cause({"metadata": {"name": "n", "uid": "u"}}, logger)
    outcomes = await run_handlers([h], cause)
    parked_state([h], outcomes)  # what Kopf's processing does next: must not raise
