"""
Our marks on Kopf's progress: how a handler's stored state says that kopf-outcomes, not Kopf,
holds it. Parking is marked, never inferred: a handler is ours when Kopf's own progress for it
carries one of these marks at the end of its message (written in the same PATCH as our memory).
A stock handler with any delay has none, and Kopf treats it exactly as without kopf-outcomes.
"""
from __future__ import annotations

import kopf

__all__ = ["HELD_MARK", "PARKED_DELAY", "PARKED_MARK", "RETAINED_MARK", "Held", "Parked", "Polling", "Rechecking",
           "Retained"]

PARKED_DELAY = 10 * 365 * 24 * 3600.0  # ten years: "until something changes"
PARKED_MARK = " [parked by kopf-outcomes]"
RETAINED_MARK = " [finalizer retained by kopf-outcomes]"  # parked too, but released only by a person
HELD_MARK = " [held by kopf-outcomes]"  # a fault, not the handler's: spends none of its retries=/timeout=


class Parked(Exception):
    """What Kopf stores as the message of a parked handler: the reason, marked as ours."""

    mark = PARKED_MARK
    # When it runs again whatever happens (an escalation's; a retained one's release, retried), if ever.
    deadline: str | None = None

    def __str__(self) -> str:
        return f"{self.args[0]}{self.mark}"


class Retained(Parked):
    """A parked handler whose finalizer is retained after a Fatal outcome, marked as such; with the
    stamp that the release answering this retention carries (the memory records it; None in a
    retention from before stamps)."""

    mark = RETAINED_MARK

    def __init__(self, reason: str, stamp: str | None) -> None:
        super().__init__(reason)
        self.stamp = stamp


class Rechecking(kopf.TemporaryError):
    """A Pending with a recheck, as Kopf sees it."""

    deadline: str | None = None  # as a parked one's


class Polling(kopf.TemporaryError):
    """A Pending with a recheck in a kind whose progress Kopf keeps in memory (timers, daemons,
    activities): Kopf's own retry after the delay, without our memory or requeue."""


class Held(kopf.TemporaryError):
    """A run held because something it depends on failed (a plugin, unread options), as Kopf sees
    it: Kopf counts it as a retry, so the next run undoes that (:func:`.internals.unheld`) by the mark."""

    def __str__(self) -> str:
        return f"{self.args[0]}{HELD_MARK}"
