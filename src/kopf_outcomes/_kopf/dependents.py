"""
The other objects of a cycle's change handlers (``depends_on_objects``): taken from Kopf's indices
once, before any handler runs; compared with what each handler last concluded about (in this
process, or as its memory stored it); and what wakes the handlers that wait on them.
"""
from __future__ import annotations

import collections
from collections.abc import Collection, Mapping

from kopf_outcomes import objects
from kopf_outcomes._kopf.internals import CHANGE, Cause, Handler, raw_body_of
from kopf_outcomes.kinds import Kind
from kopf_outcomes.memory import MemoryRecord
from kopf_outcomes.objects import ObjectRef

Taken = tuple[tuple[ObjectRef, ...], str]  # the objects, as the handler sees them, and their fingerprint

# What the handlers with other objects last concluded about, by (object uid, handler id), where
# it is not stored: a wake-up by them that concludes as before writes nothing (0 writes while
# waiting). Bounded; the memory's own fingerprint stands in for what is forgotten (one more run).
_seen: collections.OrderedDict[tuple[str, str], str] = collections.OrderedDict()
SEEN_LIMIT = 65536


def take(kind: Kind, handlers: Collection[Handler], cause: Cause) -> tuple[dict[str, Taken], set[str]]:
    """Before any handler runs: the other objects of each handler that depends on some (change
    handlers only: another kind is told once that it has none); and the handlers whose objects
    are unknown (their index is not the operator's): they must not run as if none existed (a
    deletion would release its finalizer with its children left)."""
    body, indices = raw_body_of(cause), getattr(cause, "indices", None)
    taken: dict[str, Taken] = {}
    unknown: set[str] = set()
    for handler in handlers:
        sources = objects.sources_of(handler.fn)
        if not sources or body is None or indices is None:
            continue
        if kind is not CHANGE:
            _refuse(handler, cause, f"{handler} depends on other objects, which only a change handler can do"
                                    f" (this one is a {kind.value} handler): they are ignored here.")
            continue
        missing = objects.unindexed(sources, indices)
        if missing:
            unknown.add(str(handler.id))
            _refuse(handler, cause, f"{handler} depends on other objects whose Kopf index the operator does not"
                                    f" have ({', '.join(source.index for source in missing)}): it does not run."
                                    " Pass the operator's registry to depends_on_objects(..., registry=...), and"
                                    " declare it before the operator starts.")
            continue
        refs = objects.lookup(sources, body, indices)
        taken[str(handler.id)] = (refs, objects.fingerprint(refs))
    return taken, unknown


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
    _seen[key] = fingerprint
    _seen.move_to_end(key)
    while len(_seen) > SEEN_LIMIT:
        _seen.popitem(last=False)


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


_refused: set[str] = set()


def _refuse(handler: Handler, cause: Cause, message: str) -> None:
    """A wrong use of other objects: said once per handler, at ERROR."""
    if str(handler.id) not in _refused:
        _refused.add(str(handler.id))
        cause.logger.error(message)


def _uid(cause: Cause) -> str:
    return str(((raw_body_of(cause) or {}).get("metadata") or {}).get("uid", ""))
