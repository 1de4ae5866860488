"""Escalation deadlines as the memory keeps them (issue 34, finding 1); the runs are in tests/e2e."""
from __future__ import annotations

import datetime
import types

from kopf_outcomes._kopf import deadlines
from kopf_outcomes.memory import MemoryRecord, parse
from kopf_outcomes.outcomes import Pending, with_deadline

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
    assert deadlines.wait(MemoryRecord(**{**record, "outcome": "retained"}), now) is None
    assert deadlines.wait(MemoryRecord(digest="d", outcome="pending", reason="w"), now) is None
    assert parse('{"h": {"digest": "d", "outcome": "pending", "reason": "w", "deadline": "x"}}')["h"]["deadline"] == "x"
