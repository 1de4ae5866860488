"""
A watched object's change wakes the parents that wait on it right after Kopf's indices learn of it,
before the object's own handlers run: woken after them, a parent learnt of a waiting child a recheck
interval later. The wake-up comes after Kopf replaced the object's entries, never before: a parent
woken early would find the old entries and conclude as before.
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
