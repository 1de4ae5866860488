"""
The rule: a view older than this process's own last write of an object's memory runs none of its
change handlers (the kinds with a memory). That write is newer than the view, so the view lacks what
it recorded; run on it, a handler would act as if its memory were lost, and start its side effect
twice for one state. What else the event runs (event handlers, timers, daemons, webhooks) is Kopf's.
How the versions are remembered and compared (KEP-5504), where nothing is known, and the limit that
stays: docs/safety.md, after Kopf's ``consistency_timeout``.
"""
from __future__ import annotations

import collections
import logging
from collections.abc import Mapping
from typing import Any, NamedTuple

from kopf_outcomes import bounded
from kopf_outcomes._kopf.delays import PerPatch
from kopf_outcomes._kopf.internals import OperatorWrites

__all__ = ["OwnWrites"]

_LOGGER = logging.getLogger("kopf_outcomes")

LIMIT = 65536  # objects with a write not seen yet, per process; the oldest are forgotten first


def version_of(value: object) -> tuple[int, str] | None:
    """A resourceVersion as KEP-5504 defines a comparable one (a positive integer, no leading zero),
    as a key that orders them: the longer is the newer, then by their digits (no ``int()``, which
    refuses a string of thousands of digits). Kopf marks the version of its write that removed the
    last finalizer of a deleting object (whose event never comes) with a suffix after ``~``: the
    version before it is still that write's."""
    if isinstance(value, str):
        value = value.partition("~")[0]
    if isinstance(value, str) and value.isdigit() and value.isascii() and value[0] != "0":
        return len(value), value
    return None


def _uid(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("uid") or "")


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

    content: dict[str, Any]
    fns: list[Any]  # Kopf's patch functions (its finalizer's), where its patch has them


class OwnWrites:
    """One installation's own memory writes not seen yet, by object uid: the version each returned."""

    def __init__(self) -> None:
        self._awaited: collections.OrderedDict[str, tuple[int, str]] = collections.OrderedDict()
        self._held: PerPatch[_Held] = PerPatch()  # the held cycle's patch as it began, for its apply

    def hold(self, patch: object, purged: OperatorWrites | None) -> None:
        """The change cycle whose patch this is runs on a view older than our write: what it adds
        to the patch is dropped (Kopf's progress, stored from that view, would overwrite what our
        write recorded); what the patch held when it began stays (a stock event handler's write),
        but for what Kopf's storages wrote into it where Kopf ``purged`` its progress from that view
        before (the purge would delete the parked mark our write recorded)."""
        if isinstance(patch, dict):
            content = _structure(dict(patch))
            if purged is not None:
                _without_storages(content, purged)
            self._held.put(patch, _Held(content, list(getattr(patch, "fns", ()))))

    def restore(self, patch: object) -> None:
        """If this is a held cycle's patch, put it back as it was when that cycle began (asked
        once, by its apply)."""
        held = self._held.take(patch)
        if held is not None and isinstance(patch, dict):
            patch.clear()
            patch.update(held.content)
            fns = getattr(patch, "fns", None)
            if isinstance(fns, list):
                fns[:] = held.fns

    def wrote(self, body: Mapping[str, Any], returned: object) -> None:
        """Our PATCH of the object (``body``: the view it was made from) carried our memory, and
        the API server answered with the resourceVersion ``returned``."""
        uid, version = _uid(body), version_of(returned)
        if not uid or version is None:
            self._awaited.pop(uid, None)  # unknown: nothing to compare a view with
            return
        bounded.remember(self._awaited, uid, version, LIMIT)

    def older(self, body: Mapping[str, Any], listed: bool = False) -> bool:
        """Whether the view is older than our own last memory write of its object (a view at or
        after that write ends the wait for it). A ``listed`` view (Kopf's listing, the object as
        it is now) ends it whatever its version: where that is lower (the cluster's versions went
        back, as after an etcd restore), waiting would hold the object for as many writes again."""
        if not self._awaited:
            return False
        uid = _uid(body)
        awaited = self._awaited.get(uid)
        if awaited is None:
            return False
        version = version_of((body.get("metadata") or {}).get("resourceVersion"))
        if version is None:
            return False  # a view we cannot place holds nothing, nor ends the wait
        if version >= awaited or listed:
            del self._awaited[uid]  # seen
            if version < awaited:
                metadata = body.get("metadata") or {}
                where = "/".join(str(part) for part in (metadata.get("namespace"), metadata.get("name")) if part)
                _LOGGER.warning(f"{where or uid}: listed at resourceVersion {version[1]}, below {awaited[1]} that "
                                f"this operator's own write returned (were the cluster's versions reset, as by "
                                f"an etcd restore?): the listing is taken as the object now.")
            return False
        return True

    def gone(self, body: Mapping[str, Any]) -> None:
        """The object left the cluster: nothing of it is awaited any more."""
        if self._awaited:
            self._awaited.pop(_uid(body), None)


def _without_storages(content: dict[str, Any], writes: OperatorWrites) -> None:
    """Leave out of a patch what the operator's Kopf storages write (their annotations by prefix,
    their fields), and the stanzas that leaves empty (an empty one would still be a request)."""
    metadata = content.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if isinstance(annotations, dict):
        for key in [key for key in annotations if any(key.startswith(f"{prefix}/") for prefix in writes.prefixes)]:
            del annotations[key]
    for field in writes.fields:
        _remove(content, field)
    _remove(content, ("metadata", "annotations"), only_empty=True)
    _remove(content, ("metadata",), only_empty=True)
    _remove(content, ("status",), only_empty=True)


def _remove(content: dict[str, Any], field: tuple[str, ...], only_empty: bool = False) -> None:
    holder: Any = content
    for part in field[:-1]:
        holder = holder.get(part) if isinstance(holder, dict) else None
    if isinstance(holder, dict) and field[-1] in holder and (not only_empty or holder[field[-1]] == {}):
        del holder[field[-1]]
