"""
Which handlers of an object's cause have concluded, for the summary: Kopf's progress as the cycle
began, plus the conclusions of this cycle (Kopf stores its progress only after all of the cycle's
handlers ran, so with ``all_at_once`` a sibling that concluded a moment ago is not in it yet).

This cycle's conclusions are kept by the cycle's patch (one per cycle and object) for as long as
the patch lives (a weak reference: Kopf's patches allow one). A mapping that allows none is held
among the last :data:`MAX_HELD` only; one forgotten can only keep the summary False until the
next cycle, never make it True.
"""
from __future__ import annotations

import collections
import weakref
from collections.abc import Mapping, MutableMapping
from typing import Any

from kopf_outcomes import HandlerRun

MAX_HELD = 64
_by_patch: dict[int, tuple[Any, set[str]]] = {}  # id(patch) → (a reference to it, handler ids)
_held: collections.deque[int] = collections.deque()  # ids of patches held strongly, oldest first


def add(patch: MutableMapping[str, Any], handler_id: str) -> None:
    """``handler_id`` concluded in the cycle whose patch this is."""
    known = _known(patch)
    if known is None:
        key = id(patch)
        try:
            reference: Any = weakref.ref(patch, lambda _, key=key: _by_patch.pop(key, None))  # type: ignore[misc]
        except TypeError:  # a plain dict: held, as one of the last few
            reference = _Held(patch)
            _held.append(key)
            while len(_held) > MAX_HELD:
                _by_patch.pop(_held.popleft(), None)
        known = _by_patch[key] = (reference, set())
    known[1].add(handler_id)


def siblings(run: HandlerRun, patch: MutableMapping[str, Any]) -> Mapping[str, bool] | None:
    """The cause's other handlers, by id: whether each has concluded; None where it is not known.
    A sub-handler's parent is one of them: it concludes only after its sub-handlers."""
    others = run.siblings
    if others is None:
        return None
    known = _known(patch)
    now = known[1] if known is not None else set()
    found = {handler_id: done or handler_id in now for handler_id, done in others.items()}
    if run.kind == "sub-handler" and "/" in run.handler_id:
        found[run.handler_id.rsplit("/", 1)[0]] = False
    return found


def _known(patch: MutableMapping[str, Any]) -> tuple[Any, set[str]] | None:
    known = _by_patch.get(id(patch))
    return known if known is not None and known[0]() is patch else None


class _Held:
    """A strong reference that answers as a weak one does."""

    def __init__(self, target: object) -> None:
        self.target = target

    def __call__(self) -> object:
        return self.target
