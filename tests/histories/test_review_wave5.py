"""
The stale-view-stranded fix (:mod:`kopf_outcomes._kopf.unrecorded`) as a real process has it: its
map of this process's conclusions is lost with the process, and bounded. The histories' ``restart``
starts a new operator in the same Python process, so the map survives it there: here it does not.
"""
from __future__ import annotations

import importlib.metadata

import pytest

from kopf_outcomes._kopf import unrecorded
from tests.histories import machine
from tests.histories.model import HandlerSpec
from tests.histories.test_regressions import deliver_all, succeed_on_a_stale_view_after_a_restart

# Before 1.38 Kopf removes its finalizer with a merge patch, which no stale resourceVersion refuses
# (and the histories' harness calls a process_resource_event with Kopf 1.38's no_throttling).
pytestmark = pytest.mark.skipif(
    tuple(int(part) for part in importlib.metadata.version("kopf").split(".")[:2]) < (1, 38),
    reason="Kopf < 1.38 removes the finalizer with a merge patch: a stale view's removal is not refused")


@pytest.fixture(autouse=True)
def oracle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Strict but for the stale runs' own acted_on_this_state (``stale-view``, open on main); the
    process's map of conclusions is this test's own."""
    monkeypatch.setattr(machine, "KNOWN_OPEN", frozenset({"stale-view"}))
    monkeypatch.setattr(unrecorded, "_final", type(unrecorded._final)())  # this test's process alone


def forget_like_a_new_process() -> None:
    unrecorded._final.clear()


def forget_by_the_bound() -> None:
    for index in range(unrecorded.LIMIT):  # other objects' conclusions, in a busy operator
        unrecorded.concluded(f"another-{index}", "hdl0-delete", frozenset({"a-state"}))


@pytest.mark.xfail(strict=True, raises=machine.Violation, reason=(
    "stranded: the memory of a conclusion whose write was refused lives only in the process "
    "(_kopf/unrecorded.py, a bounded in-process map): a restart (or 65,536 later conclusions) between "
    "the refused release and the next event loses it, and the parked handler is never run again (P2). "
    "Kept open by choice: the fix that passes this (run every parked deletion handler this process knows "
    "nothing of once, at the restart's listing) costs one run and one PATCH per waiting deletion per "
    "restart, against 'parked at zero cost' (benchmarks: scale, restart re-runs no parked handler); the "
    "stale view right after a restart that this needs is not one Kopf's consistent list and watch serve"))
@pytest.mark.parametrize("forget", [forget_like_a_new_process, forget_by_the_bound], ids=["restart", "eviction"])
def test_a_stale_views_refused_release_is_not_stranded_by_a_restart_after_it(forget: object) -> None:
    """As test_regressions' stale-view-stranded history, then the process restarts for real."""
    assert callable(forget)
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["pending"]) as history:
        succeed_on_a_stale_view_after_a_restart(history)
        history.restart()
        forget()
        deliver_all(history)


def test_a_stale_views_refused_release_is_run_again_in_the_same_process() -> None:
    """Guard: the same history without the restart after the refusal: released (the fix)."""
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["pending"]) as history:
        succeed_on_a_stale_view_after_a_restart(history)
        deliver_all(history)
