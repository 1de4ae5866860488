"""
Other objects a change handler depends on: its owned children, objects named by a field of the
object, objects selected by labels or fields (the sources: :mod:`kopf_outcomes.sources`).
Their state is part of the handler's state, and a parked handler wakes at once when one of them
appears, changes or goes, with no write to its object.

    @kopf_outcomes.depends_on_objects(kopf_outcomes.owned("batch/v1", "jobs"))
    @kopf.on.delete("parents")
    def delete_fn(**_):
        jobs = kopf_outcomes.recall().objects
        if jobs:
            return kopf_outcomes.Pending(f"{len(jobs)} jobs remain")

They are watched through Kopf's own machinery: each source is a Kopf index of the other
resource (so Kopf lists them all before any handler runs, also after a restart), and Kopf's
indexing of an object's event wakes the parked objects that depend on it, as soon as the index is
up to date (before that object's own handlers run: ``_kopf/requeue.py``).
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import weakref
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, TypeVar

import kopf

from kopf_outcomes import templates
from kopf_outcomes.sources import ObjectRef, Source, owned, referenced, selected

__all__ = ["ObjectRef", "Source", "changed", "depends_on_objects", "described", "fingerprint", "left", "lookup",
           "owned", "referenced", "selected", "sources_of", "unindexed", "wait"]

FnT = TypeVar("FnT", bound=Callable[..., object])

_ATTRIBUTE = "__kopf_outcomes_objects__"


def depends_on_objects(*sources: Source, registry: kopf.OperatorRegistry | None = None) -> Callable[[FnT], FnT]:
    """Make these other objects part of a change handler's state (stack it with Kopf's decorator,
    in any order; ``registry``: Kopf's, if not the default one)."""
    for position, source in enumerate(sources):
        if not isinstance(source, Source):
            raise TypeError(f"depends_on_objects(): argument {position + 1} is {source!r}, not a source:"
                            " use kopf_outcomes.owned(...), referenced(...) or selected(...)")
    if not sources:
        raise TypeError("depends_on_objects() needs at least one source")
    target = registry if registry is not None else kopf.get_default_registry()
    for source in sources:
        _watch(source, target)

    def decorate(fn: FnT) -> FnT:
        setattr(fn, _ATTRIBUTE, (*sources_of(fn), *sources))
        declared.add(True)
        return fn
    return decorate


def sources_of(fn: object) -> tuple[Source, ...]:
    found = getattr(fn, _ATTRIBUTE, ())
    return found if isinstance(found, tuple) else ()


# Whether any handler depends on objects: until one does, no cycle looks (a set: one mutable flag).
declared: set[bool] = set()


def lookup(sources: Iterable[Source], body: Mapping[str, Any], indices: Mapping[str, Any]) -> tuple[ObjectRef, ...]:
    """The objects these sources name for this object now, from Kopf's indices, in a stable order.
    An object that several sources name is one, with every source's ``fields`` (:func:`_merged`)."""
    found: dict[tuple[str, str, str], dict[Source, ObjectRef]] = {}  # by identity: fields may hold lists or dicts
    for source in sources:
        for identity, ref in _found(source, body, indices).items():
            found.setdefault(identity, {})[source] = ref
    return tuple(_merged(found[key]) for key in sorted(found))


def _merged(named: Mapping[Source, ObjectRef]) -> ObjectRef:
    """One object as several sources (in their declared order) see it: the first source's fields
    in its order, then the paths only later sources name, in theirs. A handler's positional reading
    of the fields it declared first never depends on how many sources name the object; the others'
    are read by path (:meth:`ObjectRef.field`)."""
    if len(named) == 1:
        [ref] = named.values()
        return ref
    values: dict[str, object] = {}
    for source, ref in named.items():
        values.update((path, value) for path, value in zip(source.fields, ref.fields, strict=True)
                      if path not in values)
    first = next(iter(named.values()))
    return first._replace(fields=tuple(values.values()), paths=tuple(values))


def _found(source: Source, body: Mapping[str, Any],
           indices: Mapping[str, Any]) -> dict[tuple[str, str, str], ObjectRef]:
    index = indices[source.index]
    return {(ref.namespace or "", ref.name, ref.uid): ref
            for key in source.keys(body) if key in index for ref in index[key] if isinstance(ref, ObjectRef)}


MAX_DESCRIBED = 20  # objects per source that the memory names for ``why`` (the rest are counted)


def described(sources: Iterable[Source], body: Mapping[str, Any], indices: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What the memory keeps of a handler's other objects so that ``why`` can name them and tell
    which changed since: per source, how and where they are found and their tracked fields; each
    object (at most ``MAX_DESCRIBED``) by identity, with a digest of its fields' values."""
    found = []
    for source in sources:
        refs = _found(source, body, indices)
        ordered = [refs[key] for key in sorted(refs)]
        found.append({"how": source.how, "resource": list(source.resource), "fields": list(source.fields),
                      "objects": [{"namespace": ref.namespace, "name": ref.name, "uid": ref.uid,
                                   "fields": fields_digest(ref.fields)} for ref in ordered[:MAX_DESCRIBED]],
                      **({"more": len(ordered) - MAX_DESCRIBED} if len(ordered) > MAX_DESCRIBED else {})})
    return found


def fields_digest(values: Iterable[object]) -> str:
    """A short digest of one object's tracked fields' values: what ``why`` compares with now."""
    return _hashed(list(values), 8)


def unindexed(sources: Iterable[Source], indices: Mapping[str, Any]) -> list[Source]:
    """The sources whose Kopf index the operator does not have (registered in another registry,
    or after the start): their objects are unknown, never "none"."""
    return [source for source in sources if source.index not in indices]


def fingerprint(refs: tuple[ObjectRef, ...]) -> str:
    """A short digest of the objects' state: which exist, and the values of the sources' fields
    (not their resourceVersion nor deletion mark: a write that changes nothing the handler asked
    for wakes no one): what the memory keeps and compares."""
    return _hashed([(ref.namespace, ref.name, ref.uid, ref.fields) for ref in refs], 16)


def _hashed(value: object, length: int) -> str:
    encoded = json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()[:length]


# The parked objects' workers, waiting for a change of their other objects, by wake key.
_waiters: dict[str, set[asyncio.Event]] = {}
# Every source, by index name: what an object of its resource is indexed (and woken) under.
_sources: dict[str, Source] = {}


def wait(keys: Iterable[str], event: asyncio.Event) -> Callable[[], None]:
    """Set ``event`` when an object under one of these wake keys changes; returns the undo."""
    keys = tuple(keys)
    for key in keys:
        _waiters.setdefault(key, set()).add(event)

    def forget() -> None:
        for key in keys:
            waiting = _waiters.get(key)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del _waiters[key]
    return forget


def changed(body: object, *, gone: bool = False, indices: Collection[str] | None = None) -> None:
    """An object changed or went: wake the parked objects that may depend on it, now or before
    this change (an object orphaned, or whose labels stop matching, leaves its parents' objects
    too): those under whose keys it is in the indices of ours that its resource fills
    (``indices``: by Kopf's matching of the resource; None where unknown: every one). A wake-up
    only compares the parent's objects with what its handler saw: a needless one runs nothing."""
    if not isinstance(body, Mapping):
        return
    metadata = body.get("metadata") or {}
    uid = str(metadata.get("uid", ""))
    keys = _wake_keys(body, _sources.values() if indices is None else
                      [_sources[index] for index in indices if index in _sources])
    before = _last_keys.pop(uid, ()) if gone else _last_keys.get(uid, ())
    if not gone:
        if keys:
            _last_keys[uid] = keys
        elif before:
            del _last_keys[uid]
    _wake({*keys, *before})


def left(uids: Iterable[str]) -> None:
    """Objects that Kopf's complete relisting no longer holds, though it saw no DELETED of them
    (they went while the watch was down): forget which parents they belonged to, and wake those
    parents (the objects left them; a needless wake-up only compares)."""
    for uid in uids:
        _wake(_last_keys.pop(uid, ()))


def _wake(keys: Iterable[str]) -> None:
    for key in keys:
        for event in _waiters.get(key, ()):
            event.set()


# The wake keys of each watched object that has some, as last seen: which
# parents it belonged to, so that one it leaves wakes too. Exact, not bounded: a bounded memory
# that forgot a quiet child would wake only its new parents, and the one it left would wait for it
# until its own next event (issue 43). One entry per such object, dropped when Kopf sees it go, or
# when a complete relisting of its watch no longer holds it (:func:`left`).
_last_keys: dict[str, tuple[str, ...]] = {}


def _wake_keys(body: Mapping[str, Any], sources: Iterable[Source]) -> tuple[str, ...]:
    """The keys under which the object is in these sources' indices (:meth:`Source.wake_keys`);
    interned: the children of one parent share its keys (kept per child in ``_last_keys``)."""
    return tuple(sys.intern(f"{source.index}:{key}") for source in sources for key in source.entries(body))


_watched: weakref.WeakKeyDictionary[kopf.OperatorRegistry, set[str]] = weakref.WeakKeyDictionary()


def _watch(source: Source, registry: kopf.OperatorRegistry) -> None:
    """Register the source's Kopf index once per registry: Kopf then watches the resource."""
    indexed = _watched.setdefault(registry, set())
    if source.index in indexed:
        return
    indexed.add(source.index)
    _sources[source.index] = source

    async def index(body: Mapping[str, Any], **_: Any) -> dict[str, ObjectRef]:
        return source.entries(body)  # {} when it no longer qualifies: Kopf drops its old entries

    # Kopf filters by the fixed labels, and by the presence of those computed from the parent.
    labels = {key: kopf.PRESENT if templates.is_template(value) else value for key, value in source.labels}
    kopf.index(*source.resource, id=source.index, registry=registry, labels=labels or None)(index)
