"""The recheck schedule: a grid anchored where the conclusion began, computable without a write."""
from __future__ import annotations

import asyncio
import contextvars
import datetime

import pytest

from kopf_outcomes._kopf import requeue
from kopf_outcomes.memory import MemoryRecord

START = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def rechecking(every: float | None, since: datetime.datetime | None = START) -> MemoryRecord:
    record = MemoryRecord(digest="d", outcome="pending", reason="r")
    if since is not None:
        record["since"] = since.isoformat()
    if every is not None:
        record["recheck"] = every
    return record


@pytest.mark.parametrize(("elapsed", "due"), [
    (0.0, 60.0), (1.0, 60.0), (59.0, 60.0), (59.6, 60.0),  # within the tolerance: due now
    (60.6, 120.0), (119.0, 120.0), (1000.0, 1020.0),
])
def test_the_next_grid_point(elapsed: float, due: float) -> None:
    now = START + datetime.timedelta(seconds=elapsed)
    assert requeue.next_due(rechecking(60), now) == START + datetime.timedelta(seconds=due)


@pytest.mark.parametrize("record", [rechecking(None), rechecking(60, since=None), rechecking(0)])
def test_no_grid_without_an_interval_and_a_start(record: MemoryRecord) -> None:
    assert requeue.next_due(record, START) is None


def test_only_a_pending_record_rechecks() -> None:
    record = rechecking(60)
    assert requeue.recheck_of(record) == 60
    assert requeue.recheck_of(MemoryRecord(digest="d", outcome="retry", reason="r")) is None
    assert requeue.recheck_of(None) is None


def listing(event: dict[str, object]) -> contextvars.Context:
    """A context in which the cycle processes ``event`` (as the patched worker sets it)."""
    context = contextvars.copy_context()
    context.run(requeue._stream.set, requeue.Stream(asyncio.Queue(), event))
    return context


LISTED = {"type": None, "object": {}}


@pytest.mark.parametrize(("event", "elapsed", "due"), [
    (LISTED, 60.3, 120.0),  # a restart/resume/takeover just after a point: the replica active then ran it
    (LISTED, 59.7, 60.0),  # just before one: due now, as always
    (LISTED, 0.2, 60.0),
    (requeue.Requeued(LISTED), 60.3, 60.0),  # this replica's own wake-up, a little late: due now
    ({"type": "MODIFIED", "object": {}}, 60.3, 60.0),  # a watch event: as before
])
def test_a_point_just_passed_is_not_due_again_for_a_fresh_listing(event: dict[str, object], elapsed: float,
                                                                   due: float) -> None:
    now = START + datetime.timedelta(seconds=elapsed)
    found = listing(event).run(requeue.next_due, rechecking(60), now)
    assert found == START + datetime.timedelta(seconds=due)
