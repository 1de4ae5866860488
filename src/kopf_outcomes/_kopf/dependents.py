"""
The other objects of a cycle's change handlers (``depends_on_objects``): taken from Kopf's indices
once, before any handler runs; compared with what each handler last concluded about (in this
process, or as its memory stored it); and what wakes the handlers that wait on them.
"""
from __future__ import annotations

import collections
import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from kopf_outcomes import bounded, objects
from kopf_outcomes._kopf import listing, selection
from kopf_outcomes._kopf.internals import CHANGE, SUBHANDLER, Cause, Handler, raw_body_of
from kopf_outcomes.errors import ObjectsUnknownError
from kopf_outcomes.kinds import Kind
from kopf_outcomes.memory import MemoryRecord
from kopf_outcomes.objects import ObjectRef

Taken = tuple[tuple[ObjectRef, ...], str]  # the objects, as the handler sees them, and their fingerprint

# What the handlers with other objects last concluded about, by (object uid, handler id), where
# it is not stored: a wake-up by them that concludes as before writes nothing (0 writes while
# waiting). Bounded; the memory's own fingerprint stands in for what is forgotten (one more run).
_seen: collections.OrderedDict[tuple[str, str], str] = collections.OrderedDict()
SEEN_LIMIT = 65536


def take(kind: Kind, handlers: Collection[Handler], cause: Cause) -> tuple[dict[str, Taken], dict[str, float | None]]:
    """
    Before any handler runs: the other objects of each change handler that depends on some; and
    the handlers whose objects are unknown, which must not run as if none existed (a deletion
    would release its finalizer with its children left), with when to look again (None: at the
    object's next change). Unknown: an index the operator does not have; objects where Kopf does not
    watch them (:func:`.listing.unwatched`: a reference into a namespace not served, the children of
    a cluster-scoped object under ``--namespace``); one whose listing is under way (:mod:`.listing`:
    a namespace that appeared after the start); a sub-handler's objects (held,
    its parent parked). Another kind is told once that its objects are unknown: it runs, and
    ``recall().objects`` raises there (:func:`unknown_objects`).
    """
    body, indices = raw_body_of(cause), getattr(cause, "indices", None)
    taken: dict[str, Taken] = {}
    unknown: dict[str, float | None] = {}
    for handler in handlers:
        sources = objects.sources_of(handler.fn)
        if not sources or body is None or indices is None:
            continue
        if kind is not CHANGE and kind is not SUBHANDLER:
            _refuse(handler, cause, f"{handler} depends on other objects, which only a change handler can (this one"
                                    f" is a {kind.value} handler): recall().objects raises ObjectsUnknownError here.")
            continue
        why = _unknown(kind, handler, sources, body, indices)
        if why is None:
            refs = objects.lookup(sources, body, indices)
            taken[str(handler.id)] = (refs, objects.fingerprint(refs))
        else:
            unknown[str(handler.id)], message, level = why
            _refuse(handler, cause, message, level)
    return taken, unknown


def _unknown(kind: Kind, handler: Handler, sources: Sequence[objects.Source], body: Mapping[str, Any],
             indices: Any) -> tuple[float | None, str, int] | None:
    """Why the other objects of a change handler (or sub-handler) are unknown: when to look again
    (None: at the object's next change), what to say and at which level; None where they are known."""
    if kind is SUBHANDLER:  # parked: a recheck would count against the parent's retries=
        parent = str(handler.id).rpartition("/")[0]
        return None, (f"{handler} is a sub-handler and depends on other objects, which only a change handler can:"
                      f" it does not run, and its parent keeps the object's finalizer (parked). Declare"
                      f" depends_on_objects(...) on {parent!r}, the change handler that runs it, and read"
                      f" recall().objects there."), logging.ERROR
    missing = objects.unindexed(sources, indices)
    if missing:
        return None, (f"{handler} depends on other objects whose Kopf index the operator does not have"
                      f" ({', '.join(source.index for source in missing)}): it does not run. Pass the operator's"
                      " registry to depends_on_objects(..., registry=...), and declare it before the operator"
                      " starts."), logging.ERROR
    narrowed = [f"{'/'.join(source.resource)}: {selected}" for source in sources
                if (selected := selection.selected.get(source.index))
                and (selected.fields or selected.shard or not source.within(selected.labels))]
    if narrowed:
        return None, (f"{handler} depends on other objects that the operator watches only in part: it asks the"
                      f" API server for a selection of them ({'; '.join(narrowed)}, Kopf's settings.watching), so"
                      " an object outside that selection would be taken for none. It does not run, and its object"
                      " keeps its finalizer. Select them by the same fixed labels in the source (selected(...,"
                      " labels=...)), or select nothing on the server for that resource."), logging.ERROR
    outside = {f"{'/'.join(source.resource)} in {where}": fix for source in sources
               if (found := listing.unwatched(source.index, source.namespaces(body))) for where, fix in [found]}
    if outside:
        return UNWATCHED_RECHECK, (f"{handler} depends on other objects where the operator does not watch them"
                                   f" ({'; '.join(outside)}): they are unknown, not none. It does not run, and its"
                                   f" object keeps its finalizer. {' '.join(dict.fromkeys(outside.values()))}"
                                   ), logging.ERROR
    bare = ['/'.join(source.resource) for source in sources if source.how == "referenced"
            and not (body.get("metadata") or {}).get("namespace") and listing.namespaced(source.index)
            and any(key.startswith("/") for key in source.keys(body))]
    if bare:  # None: its next change may name the namespace
        return None, (f"{handler} depends on objects that its cluster-scoped object names without a namespace"
                      f" ({', '.join(bare)}, namespaced resources): no such object can be found, which is not"
                      " none. It does not run, and its object keeps its finalizer. Name them as"
                      " 'namespace/name' (or {name: ..., namespace: ...}) in the field."), logging.ERROR
    being_listed = listing.unlisted({source.index for source in sources})
    if being_listed:
        return LISTING_RECHECK, (f"{handler} waits for Kopf to list its other objects ({'; '.join(being_listed)}:"
                                 " a namespace that appeared after the start): it runs when they are listed."
                                 ), logging.INFO
    return None


LISTING_RECHECK = 1.0  # seconds: how often a handler held for a listing under way looks again (no writes)
UNWATCHED_RECHECK = 60.0  # seconds: how often one held for an unwatched namespace looks again (one may appear)


class UnknownObjects(tuple):  # type: ignore[type-arg]
    """``recall().objects`` where they cannot be known: reading it in any way raises, so that no
    handler can take "unknown" for "none" (``if recall().objects:``, ``== ()``, ``+ ()`` included).
    Only its ``repr`` answers, to say so in a log line."""

    message: str

    def _raise(self, *_: object) -> Any:
        raise ObjectsUnknownError(self.message)

    __bool__ = __len__ = __iter__ = __reversed__ = __getitem__ = __contains__ = _raise
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _raise
    __add__ = __radd__ = __mul__ = __rmul__ = count = index = _raise
    __hash__ = object.__hash__  # its own: equal to no other tuple

    def __repr__(self) -> str:
        return f"<unknown objects: {self.message}>"


def unknown_objects(kind: Kind, handler: Handler) -> tuple[ObjectRef, ...]:
    """What ``recall().objects`` is for a handler whose objects were not taken: none if it declares
    none; else unknown (another kind than a change handler: see :func:`take`)."""
    if not objects.sources_of(handler.fn):
        return ()
    unknown = UnknownObjects()
    unknown.message = (f"{handler} depends on other objects, but they are unknown in a handler of kind"
                       f" {kind.value!r}: only a change handler's other objects are known (a sub-handler's"
                       f" and a timer's are not). Declare depends_on_objects(...) on a change handler.")
    return unknown


def previous(cause: Cause, handler_id: str, record: MemoryRecord | None) -> str | None:
    """The fingerprint of the other objects that the handler last concluded about."""
    seen = _seen.get((_uid(cause), handler_id))
    return seen if seen is not None else record.get("objects") if record is not None else None


def saw(cause: Cause, handler_id: str, fingerprint: str | None) -> None:
    """A conclusion about these objects that is not stored (None: one that is, which the memory
    carries; what this process saw before it is then forgotten, even if the PATCH fails)."""
    key = (_uid(cause), handler_id)
    if fingerprint is None:
        _seen.pop(key, None)
        return
    bounded.remember(_seen, key, fingerprint, SEEN_LIMIT)


def moved(taken: Mapping[str, Taken], handler: Handler, cause: Cause, record: MemoryRecord) -> bool:
    """Whether a handler's other objects changed since its conclusion (it is then woken)."""
    found = taken.get(str(handler.id))
    return found is not None and found[1] != previous(cause, str(handler.id), record)


def wake_keys(taken: Mapping[str, Taken], handlers: Collection[Handler], records: Mapping[str, MemoryRecord],
              waiting: Collection[str], cause: Cause) -> tuple[str, ...]:
    """What wakes the handlers that wait (parked, rechecking) on other objects; not a retained
    one: only a person's release wakes it."""
    body = raw_body_of(cause)
    if body is None:
        return ()
    retained = {handler_id for handler_id, record in records.items() if record["outcome"] == "retained"}
    return tuple({key for handler in handlers if str(handler.id) in waiting and str(handler.id) in taken
                  and str(handler.id) not in retained
                  for source in objects.sources_of(handler.fn) for key in source.wake_keys(body)})


def changed(taken: Mapping[str, Taken], handlers: Collection[Handler], cause: Cause) -> bool:
    """Whether any handler's other objects differ now from those taken when the cycle began."""
    body, indices = raw_body_of(cause), getattr(cause, "indices", None)
    if body is None or indices is None:
        return False
    return any(objects.fingerprint(objects.lookup(objects.sources_of(handler.fn), body, indices))
               != taken[str(handler.id)][1]
               for handler in handlers if str(handler.id) in taken)  # all indexed: see take()


_refused: set[tuple[str, int]] = set()


def _refuse(handler: Handler, cause: Cause, message: str, level: int = logging.ERROR) -> None:
    """Why a handler's objects are unknown: a wrong use at ERROR, a listing at INFO; once per handler."""
    if (str(handler.id), level) not in _refused:
        _refused.add((str(handler.id), level))
        cause.logger.log(level, message)


def _uid(cause: Cause) -> str:
    return str(((raw_body_of(cause) or {}).get("metadata") or {}).get("uid", ""))
