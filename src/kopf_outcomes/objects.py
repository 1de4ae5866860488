"""
Other objects a change handler depends on: its owned children, objects named by a field of the
object, objects selected by labels. Their state is part of the handler's state, and a parked
handler wakes at once when one of them appears, changes or goes, with no write to its object.

    @kopf_outcomes.depends_on_objects(kopf_outcomes.owned("batch/v1", "jobs"))
    @kopf.on.delete("parents")
    def delete_fn(**_):
        jobs = kopf_outcomes.recall().objects
        if jobs:
            return kopf_outcomes.Pending(f"{len(jobs)} jobs remain")

They are watched through Kopf's own machinery: each source is a Kopf index of the other
resource (so Kopf lists them all before any handler runs, also after a restart), and the object
workers of Kopf's watchers wake the parked objects that depend on an object that changed or went
(after Kopf's processing of its event, so that the index is up to date).
"""
from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypeVar

import kopf

FnT = TypeVar("FnT", bound=Callable[..., object])

_ATTRIBUTE = "__kopf_outcomes_objects__"
How = Literal["owned", "referenced", "selected"]


class ObjectRef(NamedTuple):
    """One object a handler depends on, as it is now (``recall().objects``). Its state for the
    handler is its existence and the source's ``fields``."""

    #: Its namespace; None for a cluster-scoped object.
    namespace: str | None
    #: Its name.
    name: str
    #: Its ``metadata.uid``.
    uid: str
    #: Its ``metadata.resourceVersion``: for the handler's information, not part of the state.
    resource_version: str
    #: Whether it has a deletionTimestamp: going, not gone (for information, not part of the state).
    deleting: bool
    #: The values of the source's ``fields``, in their order (None where a field is absent).
    fields: tuple[object, ...] = ()


@dataclass(frozen=True)
class Source:
    """Where a handler's other objects are: made by :func:`owned`, :func:`referenced`, :func:`selected`."""

    #: How the objects are found: by their ownerReferences, by a field of the object, by labels.
    how: How
    #: The resource as Kopf's decorators take it: ``("batch/v1", "jobs")``, ``("secrets",)``.
    resource: tuple[str, ...]
    #: For :func:`referenced`: the dotted path of the object's field that names them.
    field: str | None = None
    #: For :func:`selected`: the labels they carry.
    labels: tuple[tuple[str, str], ...] = ()
    #: What of each object is part of the handler's state besides its existence.
    fields: tuple[str, ...] = ()

    @property
    def index(self) -> str:
        """The name of the Kopf index that holds these objects (one per distinct source)."""
        spec = json.dumps([self.how, self.resource, self.field, self.labels, self.fields])
        return "kopf_outcomes_objects_" + hashlib.sha256(spec.encode()).hexdigest()[:12]

    def wake_keys(self, body: Mapping[str, Any]) -> list[str]:
        """What wakes the dependent object (the parent): see :func:`changed`."""
        metadata = body.get("metadata") or {}
        if self.how == "owned":
            return [f"uid:{metadata.get('uid', '')}"]
        if self.how == "selected":
            return [f"sel:{self.index}:{key}" for key in self.keys(body)]
        return [f"ref:{key}" for key in self.keys(body)]

    def keys(self, body: Mapping[str, Any]) -> list[str]:
        """The keys of the dependent object (the parent) into the index: in its namespace, and
        cluster-wide (a resource is one or the other: the resource's own scope decides)."""
        metadata = body.get("metadata") or {}
        if self.how == "owned":
            return [str(metadata.get("uid", ""))]
        scopes = list(dict.fromkeys([metadata.get("namespace") or "", ""]))
        if self.how == "selected":
            return scopes
        names = _resolve(body, (self.field or "").split("."))
        names = names if isinstance(names, list) else [names]
        return [f"{scope}/{name}" for name in names if isinstance(name, str) and name for scope in scopes]

    def entries(self, body: Mapping[str, Any]) -> dict[str, ObjectRef]:
        """The keys under which the other object is indexed (and woken for), with its reference."""
        metadata = body.get("metadata") or {}
        ref = ObjectRef(metadata.get("namespace"), str(metadata.get("name", "")), str(metadata.get("uid", "")),
                        str(metadata.get("resourceVersion", "")), metadata.get("deletionTimestamp") is not None,
                        tuple(_resolve(body, path.split(".")) for path in self.fields))
        if self.how == "owned":
            return {str(owner.get("uid")): ref for owner in metadata.get("ownerReferences") or ()
                    if isinstance(owner, Mapping) and owner.get("uid")}
        if self.how == "selected":
            return {ref.namespace or "": ref}
        return {f"{ref.namespace or ''}/{ref.name}": ref}


def owned(*resource: str, fields: Iterable[str] = ()) -> Source:
    """The objects of this resource that the object owns (their ``ownerReferences``; ``kopf.adopt``).

    By default an object's state is that it exists; ``fields`` adds field paths
    (``fields=["status.succeeded"]``: a Job finishing wakes the handler;
    ``fields=["metadata.deletionTimestamp"]``: one marked for deletion does)."""
    return Source("owned", _resource(resource, "owned"), fields=_paths(fields, "owned", "fields"))


def referenced(*resource: str, field: str, fields: Iterable[str] = ()) -> Source:
    """The objects of this resource named by ``field`` of the object (a name or a list of names),
    in its namespace: ``referenced("v1", "secrets", field="spec.secretName")``."""
    [field] = _paths([field], "referenced", "field")
    return Source("referenced", _resource(resource, "referenced"), field=field,
                  fields=_paths(fields, "referenced", "fields"))


def selected(*resource: str, labels: Mapping[str, str], fields: Iterable[str] = ()) -> Source:
    """The objects of this resource in the object's namespace with these labels."""
    if not isinstance(labels, Mapping) or not labels or not all(
            isinstance(key, str) and isinstance(value, str) for key, value in labels.items()):
        raise ValueError(f"selected(): labels must be a non-empty mapping of strings, not {labels!r}")
    return Source("selected", _resource(resource, "selected"), labels=tuple(sorted(labels.items())),
                  fields=_paths(fields, "selected", "fields"))


def _paths(paths: Iterable[str], name: str, argument: str) -> tuple[str, ...]:
    if isinstance(paths, str):
        raise TypeError(f"{name}(): {argument} must be a list of field paths, not a single string")
    found = tuple(paths)
    for path in found:
        if not isinstance(path, str) or not path or any(not part for part in path.split(".")):
            raise ValueError(f"{name}(): {argument} must be dotted paths like 'spec.secretName', not {path!r}")
    return found


def _resource(resource: tuple[str, ...], name: str) -> tuple[str, ...]:
    if not 1 <= len(resource) <= 3 or not all(isinstance(part, str) and part for part in resource):
        raise ValueError(f"{name}(): give the resource as Kopf's decorators take it, e.g. {name}('batch/v1',"
                         f" 'jobs') or {name}('secrets'), not {resource!r}")
    return resource


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
    """The objects these sources name for this object now, from Kopf's indices, in a stable order."""
    found: dict[tuple[str, str, str], ObjectRef] = {}  # by identity: fields may hold lists or dicts
    for source in sources:
        index = indices[source.index]
        for key in source.keys(body):
            if key in index:
                found.update(((ref.namespace or "", ref.name, ref.uid), ref) for ref in index[key]
                             if isinstance(ref, ObjectRef))
    return tuple(found[key] for key in sorted(found))


def unindexed(sources: Iterable[Source], indices: Mapping[str, Any]) -> list[Source]:
    """The sources whose Kopf index the operator does not have (registered in another registry,
    or after the start): their objects are unknown, never "none"."""
    return [source for source in sources if source.index not in indices]


def fingerprint(refs: tuple[ObjectRef, ...]) -> str:
    """A short digest of the objects' state: which exist, and the values of the sources' fields
    (not their resourceVersion nor deletion mark: a write that changes nothing the handler asked
    for wakes no one): what the memory keeps and compares."""
    state = [(ref.namespace, ref.name, ref.uid, ref.fields) for ref in refs]
    encoded = json.dumps(state, separators=(",", ":"), sort_keys=True, default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()[:16]


# The parked objects' workers, waiting for a change of their other objects, by wake key.
_waiters: dict[str, set[asyncio.Event]] = {}
# The label selectors of the sources, by index name: which objects a selector wakes for.
_selectors: dict[str, Source] = {}


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


def changed(body: object, *, gone: bool = False) -> None:
    """An object of any watched resource changed or went: wake the parked objects that may
    depend on it (its owners; those naming it; selectors matching its labels), now or before
    this change (an object orphaned, or whose labels stop matching, leaves its parents' objects
    too). A wake-up only compares the parent's objects with what its handler saw: a needless one
    runs nothing."""
    if not isinstance(body, Mapping):
        return
    metadata = body.get("metadata") or {}
    uid = str(metadata.get("uid", ""))
    keys = _wake_keys(metadata)
    before = _last_keys.pop(uid, ()) if gone else _last_keys.get(uid, ())
    if not gone:
        _last_keys[uid] = keys
        _last_keys.move_to_end(uid)
        if len(_last_keys) > LAST_KEYS_LIMIT:
            _last_keys.popitem(last=False)
    for key in {*keys, *before}:
        for event in _waiters.get(key, ()):
            event.set()


# The wake keys of each watched object as last seen (bounded; a forgotten one wakes by its new keys only).
_last_keys: collections.OrderedDict[str, tuple[str, ...]] = collections.OrderedDict()
LAST_KEYS_LIMIT = 65536


def _wake_keys(metadata: Mapping[str, Any]) -> tuple[str, ...]:
    namespace = metadata.get("namespace") or ""
    owners = metadata.get("ownerReferences")
    keys = [f"uid:{owner.get('uid')}" for owner in owners if isinstance(owner, Mapping)] \
        if isinstance(owners, list) else []
    keys.append(f"ref:{namespace}/{metadata.get('name', '')}")
    labels = metadata.get("labels")
    labels = labels if isinstance(labels, Mapping) else {}
    keys.extend(f"sel:{index}:{namespace}" for index, source in _selectors.items()
                if all(labels.get(key) == value for key, value in source.labels))
    return tuple(keys)


_watched: weakref.WeakKeyDictionary[kopf.OperatorRegistry, set[str]] = weakref.WeakKeyDictionary()


def _watch(source: Source, registry: kopf.OperatorRegistry) -> None:
    """Register the source's Kopf index once per registry: Kopf then watches the resource."""
    indexed = _watched.setdefault(registry, set())
    if source.index in indexed:
        return
    indexed.add(source.index)
    if source.how == "selected":
        _selectors[source.index] = source

    async def index(body: Mapping[str, Any], **_: Any) -> dict[str, ObjectRef]:
        return source.entries(body)  # {} when it no longer qualifies: Kopf drops its old entries

    kopf.index(*source.resource, id=source.index, registry=registry, labels=dict(source.labels) or None)(index)


def _resolve(value: object, path: Iterable[str]) -> object:
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value
