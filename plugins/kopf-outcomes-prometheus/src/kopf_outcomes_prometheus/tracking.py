"""
Which handlers wait now, and since when: the state behind the gauges and the histogram.

Kept per object uid (never exported: no object names in labels) and counted at scrape time.
The scrape runs in the HTTP server's thread while Kopf updates this in its event loop: a lock.
"""
from __future__ import annotations

import collections
import threading
from collections.abc import Mapping

WAITING_STATES = ("pending", "retrying", "retained")

LabelSet = tuple[str, str, str]  # resource, handler, state


class Waiting:
    """Per object, per handler: which of ``WAITING_STATES`` it is in, if any, and under which
    ``handler`` label it is counted (sub-handlers are counted under their handler's)."""

    MAX_IDLE_SERIES = 1000  # label sets kept at 0 after their last waiting object: at most these

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, dict[str, tuple[str, str, str]]] = {}
        # Label sets once reported stay, at 0, rather than vanish (a gauge that falls to zero is
        # read as such); the oldest idle ones go beyond MAX_IDLE_SERIES, so that the series stay
        # bounded whatever ids the handlers had.
        self._seen: collections.OrderedDict[LabelSet, None] = collections.OrderedDict()

    def replace(self, uid: str, resource: str, waiting: Mapping[str, str]) -> None:
        """All handlers of one object, as the core saw them in a processing cycle."""
        entries = {handler: (resource, _checked(state), handler) for handler, state in waiting.items()}
        with self._lock:
            if entries:
                self._objects[uid] = entries
            else:
                self._objects.pop(uid, None)
            for resource_, state, label in entries.values():
                self._saw((resource_, label, state))

    def set(self, uid: str, resource: str, handler: str, state: str | None, label: str | None = None) -> None:
        """One handler of one object, after a run: waiting in ``state``, or not waiting (None)."""
        with self._lock:
            entries = self._objects.setdefault(uid, {})
            if state is None:
                entries.pop(handler, None)
            else:
                entries[handler] = (resource, _checked(state), label or handler)
                self._saw((resource, label or handler, state))
            if not entries:
                del self._objects[uid]

    def _saw(self, labels: LabelSet) -> None:
        self._seen[labels] = None
        self._seen.move_to_end(labels)
        while len(self._seen) > self.MAX_IDLE_SERIES:
            self._seen.popitem(last=False)

    def state(self, uid: str, handler: str) -> str | None:
        with self._lock:
            entry = self._objects.get(uid, {}).get(handler)
        return entry[1] if entry is not None else None

    def counts(self) -> dict[LabelSet, int]:
        with self._lock:
            counts = dict.fromkeys(self._seen, 0)
            for entries in self._objects.values():
                for resource, state, label in entries.values():
                    counts[(resource, label, state)] = counts.get((resource, label, state), 0) + 1
        return counts


def _checked(state: str) -> str:
    if state not in WAITING_STATES:
        raise ValueError(f"unknown waiting state {state!r}; expected one of {', '.join(WAITING_STATES)}")
    return state


class WaitClock:
    """When each handler of each object started to wait (its first Pending or Retry) for a cause."""

    def __init__(self) -> None:
        self._started: dict[tuple[str, str, str], float] = {}

    def start(self, uid: str, handler: str, cause: str, now: float) -> None:
        self._started.setdefault((uid, handler, cause), now)

    def stop(self, uid: str, handler: str, cause: str) -> float | None:
        """Forget the wait; return when it started, if known."""
        return self._started.pop((uid, handler, cause), None)

    def forget(self, uid: str, handler: str) -> None:
        """The handler no longer waits for any cause (it failed for good, or it is gone)."""
        for key in [key for key in self._started if key[:2] == (uid, handler)]:
            del self._started[key]

    def forget_object(self, uid: str) -> None:
        """The object is gone: none of its handlers waits any more."""
        for key in [key for key in self._started if key[0] == uid]:
            del self._started[key]

    def __len__(self) -> int:
        return len(self._started)
