"""
Sub-handlers that wait for us make their parent wait with them.

Kopf retries a parent while any child is unfinished (``HandlerChildrenRetry``, with the children's
shortest delay: ten years for a parked child). When every unfinished child waits for us (parked,
rechecking or retained), the parent is parked or rechecks too, with its own memory: a change of its
state, a person's release of a retained child (``waiting.wakes``) or a child's deadline wakes it, and
its run runs the children. Where some child is Kopf's own, Kopf's retry stands with Kopf's children's
delay and ours (a quiet recheck's stored delay is stale: 0); where Kopf retries only children we hold
(:class:`.marks.Held`), the parent's retry is held too and spends none of its ``retries=``.
"""
from __future__ import annotations

import datetime
from collections.abc import Collection, Mapping

from kopf_outcomes import memory
from kopf_outcomes._kopf import deadlines
from kopf_outcomes._kopf.cycle import is_held, is_parked
from kopf_outcomes._kopf.internals import Handler, HandlerId, KopfOutcome, State, progress_of
from kopf_outcomes._kopf.marks import Held, Parked, Rechecking, Retained
from kopf_outcomes.memory import MemoryRecord
from kopf_outcomes.outcomes import Pending


def waiting(handlers: Collection[Handler], state: State, outcomes: Mapping[HandlerId, KopfOutcome],
            quiet: Collection[HandlerId], records: Mapping[str, MemoryRecord],
            waits: Collection[float], held: Mapping[str, float | None]) -> Pending | Held | float | None:
    """What the parent waits for: a Pending if every unfinished child waits for us; a Held if
    Kopf's retry is for held children only; else, if some wait for us, the delay of Kopf's retry of
    the children; else None (Kopf's retry as it is). ``quiet``:
    the rechecking children not run now, or run with nothing new to store; ``waits``: the seconds
    until our rechecking children are due; ``held``: the children not run because their other
    objects are unknown (never "none"), with when to look again."""
    reasons: list[str] = []
    rechecks: list[float] = []
    due: list[datetime.datetime] = []  # the children's escalation deadlines: the parent runs at the first
    stock: list[float] = []  # the delays of Kopf's own unfinished children
    faults: list[float] = []  # the delays of the children held by a fault (Kopf retries them too)
    now = datetime.datetime.now(datetime.timezone.utc)
    for handler in handlers:
        handler_id, outcome = str(handler.id), outcomes.get(handler.id)
        if outcome is not None and outcome.final:
            continue
        if handler_id in held and outcome is None:
            again = held[handler_id]
            if again is not None:
                rechecks.append(again)
            reasons.append(f"{handler_id} is held: its other objects are unknown")
            continue
        if outcome is not None and isinstance(outcome.exception, (Parked, Rechecking)):
            retained, reason = isinstance(outcome.exception, Retained), str(outcome.exception.args[0])
            if isinstance(outcome.exception, Rechecking):
                rechecks.append(outcome.delay or 0)
            due.extend(filter(None, [deadlines.moment(outcome.exception.deadline)]))
        elif outcome is not None:
            (faults if isinstance(outcome.exception, Held) else stock).append(outcome.delay or 0)
            continue
        else:
            progress = progress_of(state, handler)
            record = records.get(handler_id)
            if progress.finished:
                continue
            if record is None or (handler.id not in quiet and not is_parked(progress)):
                delayed = progress.delayed
                (faults if is_held(progress) else stock).append(0.0 if delayed is None else max(0.0, (
                    (delayed if delayed.tzinfo else delayed.replace(tzinfo=datetime.timezone.utc)) - now
                ).total_seconds()))
                continue
            retained, reason = record["outcome"] == "retained", record["reason"]
            if record.get("recheck"):
                rechecks.append(float(record["recheck"]))
            # A pending child's escalation; a retained child's release retried (an observer failed on
            # it), while its retry is to come (one come wakes the parent as a release: waiting.wakes).
            if not retained or deadlines.retrying(record):
                due.extend(filter(None, [deadlines.moment(record.get("deadline"))]))
        verb = "retains the finalizer" if retained else "is pending"
        reasons.append(f"{handler_id} {verb}: {memory.stored_reason(reason)}")
    if stock:
        return min([*stock, *faults, *waits]) if reasons or faults else None
    if faults:
        delay = min([*faults, *waits])
        return Held(f"sub-handlers are held: {len(faults)} of them, by a fault (see their ERROR)", delay=delay)
    if not reasons:
        return None
    parent = Pending("sub-handlers wait: " + "; ".join(reasons), recheck=min(rechecks) if rechecks else None)
    return deadlines.at(parent, min(due)) if due else parent
