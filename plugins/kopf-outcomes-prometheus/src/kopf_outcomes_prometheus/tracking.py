"""
Which handlers wait now, and since when: the state behind the gauges and the histogram.

Kept per object uid (never exported: no object names in labels) and counted at scrape time.
The scrape runs in the HTTP server's thread while Kopf updates this in its event loop: a lock.
"""
from __future__ import annotations

import threading
from collections.abc import Mapping

WAITING_STATES = ("pending", "retrying", "retained")

LabelSet = tuple[str, str, str]  # resource, handler, state


class Waiting:
    """Per object, per handler: which of ``WAITING_STATES`` it is in, if any."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, dict[str, tuple[str, str]]] = {}
        self._seen: set[LabelSet] = set()  # label sets once reported stay, at 0, not vanish

    def replace(self, uid: str, resource: str, waiting: Mapping[str, str]) -> None:
        """All handlers of one object, as the core saw them in a processing cycle."""
        entries = {handler: (resource, _checked(state)) for handler, state in waiting.items()}
        with self._lock:
            if entries:
                self._objects[uid] = entries
            else:
                self._objects.pop(uid, None)
            self._seen.update((resource, handler, state) for handler, (resource, state) in entries.items())

    def set(self, uid: str, resource: str, handler: str, state: str | None) -> None:
        """One handler of one object, after a run: waiting in ``state``, or not waiting (None)."""
        with self._lock:
            entries = self._objects.setdefault(uid, {})
            if state is None:
                entries.pop(handler, None)
            else:
                entries[handler] = (resource, _checked(state))
                self._seen.add((resource, handler, state))
            if not entries:
                del self._objects[uid]

    def state(self, uid: str, handler: str) -> str | None:
        with self._lock:
            entry = self._objects.get(uid, {}).get(handler)
        return entry[1] if entry is not None else None

    def counts(self) -> dict[LabelSet, int]:
        with self._lock:
            counts = dict.fromkeys(self._seen, 0)
            for entries in self._objects.values():
                for handler, (resource, state) in entries.items():
                    counts[(resource, handler, state)] += 1
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
