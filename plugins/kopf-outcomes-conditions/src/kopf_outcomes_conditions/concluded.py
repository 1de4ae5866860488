"""
Which handlers of an object's cause have concluded, for the summary: Kopf's progress as the cycle
began, plus the conclusions of this cycle (Kopf stores its progress only after all of the cycle's
handlers ran, so with ``all_at_once`` a sibling that concluded a moment ago is not in it yet).

This cycle's conclusions are kept by the cycle's patch (one per cycle and object), for the few
patches in flight at once: at most :data:`MAX_PATCHES`, the oldest forgotten first (a forgotten
conclusion can only keep the summary False until the next cycle, never make it True).
"""
from __future__ import annotations

import collections
from collections.abc import Mapping, MutableMapping
from typing import Any

from kopf_outcomes import HandlerRun

MAX_PATCHES = 1024
_patches: collections.OrderedDict[int, tuple[MutableMapping[str, Any], set[str]]] = collections.OrderedDict()


def add(patch: MutableMapping[str, Any], handler_id: str) -> None:
    """``handler_id`` concluded in the cycle whose patch this is."""
    known = _patches.get(id(patch))
    if known is None or known[0] is not patch:
        known = _patches[id(patch)] = (patch, set())  # kept: its id cannot be reused meanwhile
        while len(_patches) > MAX_PATCHES:
            _patches.popitem(last=False)
    known[1].add(handler_id)


def siblings(run: HandlerRun, patch: MutableMapping[str, Any]) -> Mapping[str, bool] | None:
    """The cause's other handlers, by id: whether each has concluded; None where it is not known.
    A sub-handler's parent is one of them: it concludes only after its sub-handlers."""
    others = run.siblings
    if others is None:
        return None
    known = _patches.get(id(patch))
    now = known[1] if known is not None and known[0] is patch else set()
    found = {handler_id: done or handler_id in now for handler_id, done in others.items()}
    if run.kind == "sub-handler" and "/" in run.handler_id:
        found[run.handler_id.rsplit("/", 1)[0]] = False
    return found
