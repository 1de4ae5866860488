"""Escalation deadlines as the memory keeps them (issue 34, finding 1); the runs are in tests/e2e."""
from __future__ import annotations

import asyncio
import datetime
import importlib.metadata
import logging
import types
from typing import Any

import pytest

import kopf_outcomes
from kopf_outcomes import Retry
from kopf_outcomes._kopf import deadlines
from kopf_outcomes.memory import MemoryRecord, parse
from kopf_outcomes.outcomes import Pending, with_deadline
from tests.unit.kopf_objects import changing_cause, handler, run_handlers
from tests.unit.test_patched_execution import BODY

UTC = datetime.timezone.utc
STARTED = datetime.datetime(2026, 12, 2, 12, 0, 0)  # Kopf keeps naive UTC times


def test_the_deadline_is_the_handlers_start_plus_the_threshold_whenever_it_is_computed():
    state = types.SimpleNamespace(started=STARTED)
    assert deadlines.stamp(state, with_deadline(Pending("w"), 600)) == "2026-12-02T12:10:00+00:00"
    assert deadlines.stamp(state, with_deadline(with_deadline(Pending("w"), 600), 60)) == "2026-12-02T12:01:00+00:00"
    assert deadlines.stamp(state, Pending("w")) is None
    assert deadlines.stamp(None, with_deadline(Pending("w"), 600)) is None
    assert deadlines.stamp(state, with_deadline(Pending("w"), 1e15)) is None  # beyond the calendar


def test_the_wait_is_read_from_the_memory_and_a_forged_one_schedules_nothing():
    now = datetime.datetime(2026, 12, 2, 12, 5, 0, tzinfo=UTC)
    record = MemoryRecord(digest="d", outcome="pending", reason="w", deadline="2026-12-02T12:10:00+00:00")
    assert deadlines.wait(record, now) == 300.0
    assert deadlines.wait(record, now + datetime.timedelta(hours=1)) == 0.0  # passed while no replica ran: due
    assert deadlines.wait(MemoryRecord(**{**record, "deadline": "soon"}), now) is None
    assert deadlines.wait(MemoryRecord(**{**record, "outcome": "success"}), now) is None
    # A retained one's is its release's retry (an observer failed on it): counted only where Kopf's
    # progress carries the retained mark (reaction.select reads it through cycle.record_of).
    assert deadlines.wait(MemoryRecord(**{**record, "outcome": "retained"}), now) == 300.0
    assert deadlines.wait(MemoryRecord(digest="d", outcome="pending", reason="w"), now) is None
    assert parse('{"h": {"digest": "d", "outcome": "pending", "reason": "w", "deadline": "x"}}')["h"]["deadline"] == "x"


@pytest.mark.skipif(importlib.metadata.version("kopf").startswith("1.37."), reason=(
    "Kopf 1.37 reads a run's time off the wall clock, which this test's loop clock cannot move"))
async def test_a_retry_cut_to_the_deadline_runs_at_it_as_kopf_counts_the_delay_from_the_runs_end(
        unpatched: None, tmp_path: Any, logger: logging.Logger, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43, finding 5: a handler that takes 30 s to fail, 60 s before its escalation's deadline,
    asks for 50 s: Kopf counts the delay from the run's end, so it must get 30 s, not 50 s (cut by
    the run's start, it ran and escalated 20 s after the deadline)."""
    policy = tmp_path / "policy.toml"
    policy.write_text('escalate = [{ after_seconds = 60, outcome = "fatal" }]\n')
    kopf_outcomes.install(entry_points=False, policy=policy)
    loop = asyncio.get_running_loop()

    def slow_failure(**_: Any) -> Any:
        clock = loop.time
        monkeypatch.setattr(loop, "time", lambda: clock() + 30.0)  # Kopf's clock: 30 s pass in the run
        return Retry("not yet", delay=50)

    outcomes = await run_handlers([handler(slow_failure, id="h")], changing_cause(BODY, logger))
    assert outcomes["h"].delay == pytest.approx(30.0, abs=0.5)  # was: 50.0, the deadline passed by 20 s
