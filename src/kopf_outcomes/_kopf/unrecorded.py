"""
A parked handler that this process saw conclude for good, while the object still shows it waiting.

A cycle on a view older than the object's (a stale event, after a failover or a relist) can run a
parked deletion handler that its view does not show parked; it concludes, and Kopf decides to
remove the finalizer. That PATCH carries the old view's resourceVersion and is refused: the
conclusion is lost, and the object still shows the handler parked (its memory and Kopf's progress).
Kopf keeps retrying the removal, which the memory holds (``held``), and a parked handler runs only
on a change: nothing would ever wake it. So a handler this process concluded for good that the
object shows waiting runs again on the current view, and concludes afresh (its memory says whether
it acted on this state); the finalizer is held until it does.
"""
from __future__ import annotations

import collections

__all__ = ["concluded", "done_here"]

LIMIT = 65536  # objects × handlers remembered per process; the oldest are forgotten first

_final: collections.OrderedDict[tuple[str, str], bool] = collections.OrderedDict()


def concluded(uid: str, handler_id: str, final: bool) -> None:
    """This process's latest conclusion of the handler on the object (``final``: for good)."""
    _final[uid, handler_id] = final
    _final.move_to_end((uid, handler_id))
    while len(_final) > LIMIT:
        _final.popitem(last=False)


def done_here(uid: str, handler_id: str) -> bool:
    """Whether this process's latest conclusion of the handler on the object was for good."""
    return _final.get((uid, handler_id), False)
