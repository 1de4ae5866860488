"""
The reaction cycle runs Kopf's own ``execute_handler_once`` between the steps of one handler run,
with no coroutine of ours around it (issue 33: each costs every run its frame), and still goes
through whatever wraps ``execute_handler_once`` after the patch (a tool's, the parity job's).
"""
from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import kopf
import pytest
from kopf._core.actions import execution

import kopf_outcomes
from kopf_outcomes import Pending, _kopf
from kopf_outcomes._kopf.cycle import NO_IDS, NONE_YET, make
from kopf_outcomes._kopf.marks import PARKED_DELAY
from tests.unit.kopf_objects import changing_cause, handler, run_handler, run_handlers

_KOPF_BOUNDARY = os.path.dirname(_kopf.__file__)


@pytest.fixture(autouse=True)
def _installed() -> Iterator[None]:
    kopf_outcomes.uninstall()
    kopf_outcomes.install(entry_points=False)
    yield
    kopf_outcomes.uninstall()


def _frames_of_ours() -> list[str]:
    """The functions of the patch's runs and cycles in the running handler's call chain (the
    cycle's own, execute_handlers_once, aside)."""
    frame, names = sys._getframe(1), []
    while frame is not None:
        if frame.f_code.co_filename.startswith(_KOPF_BOUNDARY) and frame.f_code.co_name != "execute_handlers_once":
            names.append(frame.f_code.co_name)
        frame = frame.f_back
    return names


async def test_a_cycle_runs_a_handler_with_no_frame_of_ours_but_the_invoke_layer(logger: logging.Logger) -> None:
    seen: list[list[str]] = []

    async def fn(**_: Any) -> None:
        seen.append(_frames_of_ours())

    outcomes = await run_handlers([handler(fn)], changing_cause({"metadata": {"name": "n", "uid": "u"}}, logger))
    assert outcomes["h"].final is True
    assert seen == [["invoke_handler"]]


async def test_a_handler_entered_directly_keeps_both_layers(logger: logging.Logger) -> None:
    seen: list[list[str]] = []

    async def fn(**_: Any) -> None:
        seen.append(_frames_of_ours())

    outcome = await run_handler(handler(fn), changing_cause({"metadata": {"name": "n", "uid": "u"}}, logger))
    assert outcome.final is True
    assert seen == [["invoke_handler", "execute_handler_once"]]


async def test_a_wrapper_put_in_after_the_patch_is_called_by_the_cycle(logger: logging.Logger) -> None:
    patched, called = execution.execute_handler_once, []

    async def wrapper(**kwargs: Any) -> Any:
        called.append(str(kwargs["handler"].id))
        return await patched(**kwargs)

    async def fn(**_: Any) -> Pending:
        return Pending("waits")

    execution.execute_handler_once = wrapper  # taken out before uninstall() puts Kopf's own back
    try:
        outcomes = await run_handlers([handler(fn)], changing_cause({"metadata": {"name": "n", "uid": "u"}}, logger))
    finally:
        execution.execute_handler_once = patched
    assert called == ["h"]
    assert outcomes["h"].final is False and outcomes["h"].delay == PARKED_DELAY  # our outcome, through it


def test_a_cycles_containers_are_its_own_once_written_and_the_shared_empties_stay_empty(
        logger: logging.Logger) -> None:
    """Cycles start with shared read-only empties: one cycle's write never shows in another's."""
    the_handler = handler(lambda **_: None)
    cause = changing_cause({"metadata": {"name": "n", "namespace": "ns", "uid": "u"}}, logger)
    first, second = (make(kopf.OperatorSettings(), cause, [the_handler]) for _ in range(2))
    first.own_tracked()["h"] = (the_handler, first, True)
    first.own_quiet().add("h")
    first.own_children()["h"] = 1.0
    assert second.tracked == {} and second.quiet == set() and second.children == {}
    assert NONE_YET == {} and NO_IDS == frozenset()
    with pytest.raises(TypeError):
        second.tracked["h"] = (the_handler, second, True)  # type: ignore[index]  # a write that skips own_*()
