"""
Sub-handlers that wait for us make their parent wait with them.

Kopf runs sub-handlers (``kopf.execute``, ``@kopf.subhandler``, ``kopf.register``) inside the
parent's run, and retries the parent while any child is unfinished (``HandlerChildrenRetry``,
with the children's shortest delay: ten years for a parked child). When every unfinished child
waits for us (parked, rechecking or retained), the parent is parked or rechecks too, with its
own memory: a change of its state wakes it, and its run wakes the children whose state changed.
A person's release of a retained child wakes the parent as well (``cycle.wakes``). When some
child is Kopf's own (a ``TemporaryError``), Kopf's retry of the children stands.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping

from kopf_outcomes._kopf.cycle import is_parked
from kopf_outcomes._kopf.internals import Handler, HandlerId, KopfOutcome, State, progress_of
from kopf_outcomes._kopf.marks import Parked, Rechecking, Retained
from kopf_outcomes.outcomes import Pending


def waiting(handlers: Collection[Handler], state: State, outcomes: Mapping[HandlerId, KopfOutcome],
            quiet: Collection[HandlerId]) -> Pending | None:
    """What the parent waits for, if every unfinished child waits for us; else None.
    ``quiet``: the rechecking children not run now, or run with nothing new to store."""
    reasons: list[str] = []
    rechecks: list[float] = []
    for handler in handlers:
        outcome = outcomes.get(handler.id)
        if outcome is None:
            progress = progress_of(state, handler)
            if progress.finished:
                continue
            if handler.id not in quiet and not is_parked(progress):
                return None
            reasons.append(f"{handler.id} waits")
            continue
        if outcome.final:
            continue
        if not isinstance(outcome.exception, (Parked, Rechecking)):
            return None
        if isinstance(outcome.exception, Rechecking):
            rechecks.append(outcome.delay or 0)
        verb = "retains the finalizer" if isinstance(outcome.exception, Retained) else "is pending"
        reasons.append(f"{handler.id} {verb}: {outcome.exception.args[0]}")
    if not reasons:
        return None
    return Pending("sub-handlers wait: " + "; ".join(reasons), recheck=min(rechecks) if rechecks else None)

