"""
A parked handler that this process saw conclude for good, while the object still shows it waiting.

A cycle on a stale view can run a parked deletion handler to its end; the finalizer's removal is then
refused (the old resourceVersion), the conclusion is lost, and a parked handler runs only on a change
(the scenario: ``waiting.wakes``, tests/histories/test_review_wave5.py). So it runs again on the
current view (the finalizer held until then), only where its conclusion was about the state the object
shows now: a wait on another state is not the one it concluded.
"""
from __future__ import annotations

import collections

from kopf_outcomes import bounded

__all__ = ["concluded", "done_here"]

LIMIT = 65536  # objects × handlers remembered per process; the oldest are forgotten first

# By object and handler: the state digests this process's latest conclusion of it for good was about
# (empty: its latest conclusion was not for good). A conclusion here about another state says nothing
# of a wait the object shows now: another process (a failover, a shard moved back) may have parked
# the handler on a newer state after this process's write was accepted.
_final: collections.OrderedDict[tuple[str, str], frozenset[str]] = collections.OrderedDict()

NOT_FOR_GOOD: frozenset[str] = frozenset()


def concluded(uid: str, handler_id: str, about: frozenset[str] = NOT_FOR_GOOD) -> None:
    """This process's latest conclusion of the handler on the object; ``about``: for good, about the
    state with these digests (as the run saw it, and as the run's write leaves it)."""
    bounded.remember(_final, (uid, handler_id), about, LIMIT)


def done_here(uid: str, handler_id: str) -> frozenset[str]:
    """The digests of the state this process's latest conclusion of the handler on the object was
    about, where it was for good; else none."""
    return _final.get((uid, handler_id), NOT_FOR_GOOD)
