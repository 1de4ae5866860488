"""
Deadlines of waiting handlers: a Pending under a time-based escalation (``after_seconds`` with
``outcome = "fatal"``) runs again at its deadline even if nothing changes, so that the escalation
is decided then; a parked Pending would otherwise run only on a change, and never escalate.

The deadline is the moment the escalation is reached: Kopf's ``started`` of the handler plus the
threshold (what :attr:`HandlerRun.runtime` is compared with). It is stored in the handler's
memory, in the same PATCH as its conclusion, and scheduled like a recheck (:mod:`.requeue`): the
object's worker sleeps until then and queues the object's last event again, with no write before
it. A restart, a resume or a takeover re-arms it from the memory; one missed while no replica
ran is due at once.
"""
from __future__ import annotations

import datetime

from kopf_outcomes._kopf.internals import HandlerState
from kopf_outcomes.memory import MemoryRecord
from kopf_outcomes.outcomes import Outcome, deadline_of

# Seconds slept past a deadline: the run then finds the escalation reached (Kopf measures its
# runtime by the loop's clock, the deadline is by the wall clock), never just short of it.
MARGIN = 0.2


def stamp(state: HandlerState | None, outcome: Outcome) -> str | None:
    """The deadline of a Pending that has one, as the memory stores it (UTC, ISO 8601)."""
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
    """Seconds until the deadline of a pending handler (0.0: it has come), None without one."""
    if record is None or "deadline" not in record or record["outcome"] != "pending":
        return None
    return until(record["deadline"], now)


def until(deadline: str | None, now: datetime.datetime) -> float | None:
    if not deadline:
        return None
    try:
        moment = datetime.datetime.fromisoformat(deadline)
    except ValueError:
        return None  # not ours to schedule (forged): the handler waits as parked, on a change
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return max(0.0, (moment - now).total_seconds())
