"""
A Pending under a time-based escalation (``after_seconds`` with ``outcome = "fatal"``) runs again at
its deadline even if nothing changes: parked, it would run only on a change, and never escalate. The
deadline (Kopf's ``started`` plus the threshold, what :attr:`HandlerRun.runtime` is compared with) is
stored with the conclusion and scheduled as a recheck is (:mod:`.requeue`): with no write before it,
re-armed from the memory after a restart; one missed while no replica ran is due at once.
"""
from __future__ import annotations

import datetime

from kopf_outcomes._kopf.internals import HandlerState
from kopf_outcomes.memory import MemoryRecord
from kopf_outcomes.outcomes import Outcome, Pending, deadline_of
from kopf_outcomes.values import MAX_DELAY

# Seconds slept past a deadline: the run then finds the escalation reached (Kopf measures its
# runtime by the loop's clock, the deadline is by the wall clock), never just short of it.
MARGIN = 0.2


class Waiting(Pending):
    """A parent's Pending while its sub-handlers wait, due at the first of their deadlines: the
    parent then runs, and runs the child whose deadline it is (children run only in its run)."""

    deadline: str


def at(outcome: Pending, deadline: datetime.datetime) -> Pending:
    waiting = Waiting(outcome.reason, recheck=outcome.recheck)
    waiting.deadline = deadline.isoformat()
    return waiting


def stamp(state: HandlerState | None, outcome: Outcome) -> str | None:
    """The deadline of a Pending that has one, as the memory stores it (UTC, ISO 8601)."""
    if isinstance(outcome, Waiting):
        return outcome.deadline
    runtime = deadline_of(outcome)
    started = getattr(state, "started", None)
    if runtime is None or not isinstance(started, datetime.datetime):
        return None
    if started.tzinfo is None:  # Kopf keeps naive UTC times
        started = started.replace(tzinfo=datetime.timezone.utc)
    try:
        return (started + datetime.timedelta(seconds=runtime)).isoformat()
    except OverflowError:  # a threshold beyond the calendar: never reached, nothing to schedule
        return None


def wait(record: MemoryRecord | None, now: datetime.datetime) -> float | None:
    """Seconds until the deadline of a waiting handler (0.0: it has come), None without one: a
    pending one's escalation, or a retained one's release, retried after an observer failed on it."""
    if record is None or "deadline" not in record or record["outcome"] not in _DUE:
        return None
    return until(record["deadline"], now)


_DUE = frozenset({"pending", "retained"})


def retrying(record: MemoryRecord) -> bool:
    """Whether a retained handler's release waits for its retry (its deadline is still to come, and
    no further ahead than a retry sets it: see :func:`far_ahead`)."""
    wait = until(record.get("deadline"), datetime.datetime.now(datetime.timezone.utc))
    return wait is not None and 0 < wait <= MAX_DELAY


def far_ahead(record: MemoryRecord) -> bool:
    """Whether a retained handler's deadline is further ahead than any retry of its release sets it
    (a retry waits :data:`~kopf_outcomes.values.MAX_DELAY` at most): forged, or written by a clock
    far ahead. It is garbage, and never holds a release: attempting the release now is what the
    person asked for, and the finalizer goes only if it concludes (its observers told)."""
    wait = until(record.get("deadline"), datetime.datetime.now(datetime.timezone.utc))
    return wait is not None and wait > MAX_DELAY


def until(deadline: str | None, now: datetime.datetime) -> float | None:
    found = moment(deadline)
    return None if found is None else max(0.0, (found - now).total_seconds())


def moment(deadline: str | None) -> datetime.datetime | None:
    """A stored deadline as a time; None if none, or one that is not a time (forged: the handler
    then waits as parked, on a change)."""
    if not deadline:
        return None
    try:
        found = datetime.datetime.fromisoformat(deadline)
    except ValueError:
        return None
    return found if found.tzinfo is not None else found.replace(tzinfo=datetime.timezone.utc)
