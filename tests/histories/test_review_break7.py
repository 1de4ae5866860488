"""
A refused conclusion for good re-runs a parked handler only where it was about the state the object
shows (:mod:`kopf_outcomes._kopf.unrecorded` keeps the digests): attempts to strand it with writes
of another operator, a person, a stale view again, or time, after the refusal (all held).
"""
from __future__ import annotations

import importlib.metadata
from collections.abc import Callable

import pytest

from kopf_outcomes._kopf import unrecorded
from tests.histories import machine
from tests.histories.model import HandlerSpec
from tests.histories.test_regressions import deliver_all, succeed_on_a_stale_view_after_a_restart

pytestmark = pytest.mark.skipif(
    tuple(int(part) for part in importlib.metadata.version("kopf").split(".")[:2]) < (1, 38),
    reason="Kopf < 1.38 removes the finalizer with a merge patch: a stale view's removal is not refused")


@pytest.fixture(autouse=True)
def oracle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "KNOWN_OPEN", frozenset({"stale-view"}))
    monkeypatch.setattr(unrecorded, "_final", type(unrecorded._final)())  # this test's process alone


def bookkeeping(history: machine.Histories) -> None:
    history.another_operator_writes_its_bookkeeping()


def bookkeeping_then_stale(history: machine.Histories) -> None:
    history.another_operator_writes_its_bookkeeping()
    history.deliver_stale(back=1)


def a_person_then_stale(history: machine.Histories) -> None:
    history.user_changes("annotations", 1)
    history.deliver_stale(back=1)


def time_passes(history: machine.Histories) -> None:
    history.time_passes(61)


def older_stale(history: machine.Histories) -> None:
    history.deliver_stale(back=2)


@pytest.mark.parametrize("after", [bookkeeping, bookkeeping_then_stale, a_person_then_stale, time_passes, older_stale])
def test_a_refused_release_followed_by_other_writes_is_not_stranded(
        after: Callable[[machine.Histories], None]) -> None:
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["pending"]) as history:
        succeed_on_a_stale_view_after_a_restart(history)
        after(history)
        deliver_all(history)


@pytest.mark.parametrize("own_writes", [True, False])
def test_a_refused_release_among_another_operators_writes_is_not_stranded(own_writes: bool) -> None:
    """The handler writing its own status, another operator's bookkeeping before and after each step."""
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["pending"]) as history:
        if own_writes:
            history.handler_writes_its_own_status(0)
        history.delete()
        history.another_operator_writes_its_bookkeeping()
        history.deliver_stale(back=1)
        history.behaviour_changes(behaviour="success", index=0)
        history.another_operator_writes_its_bookkeeping()
        history.restart()
        history.deliver_stale(back=1)
        history.another_operator_writes_its_bookkeeping()
        deliver_all(history)


def test_an_observer_failing_on_a_stale_views_conclusion_strands_nothing() -> None:
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["pending"], plugin=True) as history:
        history.delete()
        history.another_operator_writes_its_bookkeeping()
        history.deliver_stale(back=1)
        history.behaviour_changes(behaviour="success", index=0)
        history.restart()
        history.plugin_fault_changes(("observe_outcome", "raise"))
        history.deliver_stale(back=1)
        history.plugin_fault_changes(("observe_outcome", "ok"))
        deliver_all(history)
