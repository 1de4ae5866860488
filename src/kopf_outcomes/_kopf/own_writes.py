"""
The rule: a view older than this process's own last write of an object's memory runs none of its
change handlers (the kinds with a memory). That write is newer than the view, so the view lacks what
it recorded; run on it, a handler would act as if its memory were lost, and start its side effect
twice for one state. What else the event runs (event handlers, timers, daemons, webhooks) is Kopf's.

Kopf waits for the event of its own PATCH only ``consistency_timeout`` seconds, then processes the
older events it has (another operator's bookkeeping written just before ours, say). We remember the
resourceVersion each PATCH that carried our memory returned, per object (uid), and compare a view's
with it: resource versions of one resource are comparable integers (Kubernetes KEP-5504, stable in
1.35; etcd's revisions always were). A view at or after that version ends the wait. Where our
write's version is not such an integer, or Kopf does not tell the version its PATCH returned (1.37),
we know nothing and record nothing: the cycle is Kopf's, as without this rule; a view whose version
is not one is left to Kopf too, and the wait goes on. A restarted process or another replica has no
such knowledge either: that stays the limit safety.md names.
"""
from __future__ import annotations

import collections
import contextvars
from collections.abc import Mapping
from typing import Any, NamedTuple

__all__ = ["OwnWrites"]

LIMIT = 65536  # objects with a write not seen yet, per process; the oldest are forgotten first


def version_of(value: object) -> int | None:
    """A resourceVersion as KEP-5504 defines a comparable one (a positive integer, no leading zero).
    Kopf marks the version of its write that removed the last finalizer of a deleting object (whose
    event never comes) with a suffix after ``~``: the version before it is still that write's."""
    if isinstance(value, str):
        value = value.partition("~")[0]
    if isinstance(value, str) and value.isdigit() and value.isascii() and value[0] != "0":
        return int(value)
    return None


def _uid_version(body: Mapping[str, Any]) -> tuple[str, int | None]:
    metadata = body.get("metadata") or {}
    return str(metadata.get("uid") or ""), version_of(metadata.get("resourceVersion"))


def _structure(value: Any) -> Any:
    """A copy of a patch's dicts and lists, which the held cycle may change in place; other values
    are kept as they are (a handler's value need not be copyable)."""
    if isinstance(value, dict):
        return {key: _structure(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_structure(item) for item in value]
    return value


class _Held(NamedTuple):
    """The patch of a change cycle held on an older view, as it was when that cycle began."""

    patch: dict[str, Any]
    content: dict[str, Any]
    fns: list[Any]  # Kopf's patch functions (its finalizer's), where its patch has them


class OwnWrites:
    """One installation's own memory writes not seen yet, by object uid: the version each returned."""

    def __init__(self) -> None:
        self._awaited: collections.OrderedDict[str, int] = collections.OrderedDict()
        # The held cycle's patch, until its apply: per worker task, as Kopf's cycles of objects interleave.
        self._held: contextvars.ContextVar[_Held | None] = contextvars.ContextVar("kopf_outcomes_held", default=None)

    def hold(self, patch: object, purged: bool) -> None:
        """The change cycle whose patch this is runs on a view older than our write: what it adds
        to the patch is dropped (Kopf's progress, stored from that view, would overwrite what our
        write recorded); what the patch held when it began stays (a stock event handler's write),
        unless Kopf ``purged`` its progress from that view before (then nothing of it stays)."""
        if isinstance(patch, dict):
            kept = ({}, []) if purged else (_structure(dict(patch)), list(getattr(patch, "fns", ())))
            self._held.set(_Held(patch, *kept))

    def restore(self, patch: object) -> None:
        """If this is the held cycle's patch, put it back as it was when that cycle began (asked
        once, by its apply)."""
        held = self._held.get()
        if held is None:
            return
        self._held.set(None)
        if held.patch is patch:
            patch.clear()
            patch.update(held.content)
            fns = getattr(patch, "fns", None)
            if isinstance(fns, list):
                fns[:] = held.fns

    def wrote(self, body: Mapping[str, Any], returned: object) -> None:
        """Our PATCH of the object (``body``: the view it was made from) carried our memory, and
        the API server answered with the resourceVersion ``returned``."""
        uid, _ = _uid_version(body)
        version = version_of(returned)
        if not uid or version is None:
            self._awaited.pop(uid, None)  # unknown: nothing to compare a view with
            return
        self._awaited[uid] = version
        self._awaited.move_to_end(uid)
        while len(self._awaited) > LIMIT:
            self._awaited.popitem(last=False)

    def older(self, body: Mapping[str, Any]) -> bool:
        """Whether the view is older than our own last memory write of its object (a view at or
        after that write ends the wait for it)."""
        if not self._awaited:
            return False
        uid, version = _uid_version(body)
        awaited = self._awaited.get(uid)
        if awaited is None:
            return False
        if version is None:
            return False  # a view we cannot place holds nothing, nor ends the wait
        if version >= awaited:
            del self._awaited[uid]  # seen
            return False
        return True

    def gone(self, body: Mapping[str, Any]) -> None:
        """The object left the cluster: nothing of it is awaited any more."""
        if self._awaited:
            self._awaited.pop(_uid_version(body)[0], None)
