"""
A watched object's change reaches the parents that wait on it when Kopf's indices learn of it:
right after Kopf's ``indexing.index_resource`` for its event, before the object's own handlers run.
Waking the parents after the object's own processing made them as late as its handlers: a child
whose own handler waits (a recheck, its own other objects) told its parents a recheck interval
later, or at its next event. Here the bound is the watch, whatever the child's handlers do.

The parents then read the index as it is now: the wake-up comes after Kopf replaced the object's
entries, never before (a parent woken early would find the old entries and conclude as before).
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kopf_outcomes import objects
from kopf_outcomes._kopf import listing, requeue


def wrap(original: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """Kopf's ``indexing.index_resource``, which then wakes the parents of the object it indexed."""
    async def index_resource(**kwargs: Any) -> None:
        raw_event = kwargs["raw_event"]
        try:
            await original(**kwargs)
        finally:  # an indexing that failed midway may have changed the index too: wake (a needless one costs nothing)
            if objects.declared and raw_event.__class__ is not requeue.Requeued:  # a recheck indexes nothing
                objects.changed(raw_event.get("object"), gone=raw_event.get("type") == "DELETED",
                                indices=listing.own_indices(kwargs.get("registry"), kwargs.get("resource")))
    return index_resource
