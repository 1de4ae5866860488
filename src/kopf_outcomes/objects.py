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

from kopf_outcomes import paths, templates

FnT = TypeVar("FnT", bound=Callable[..., object])

_ATTRIBUTE = "__kopf_outcomes_objects__"
How = Literal["owned", "referenced", "selected"]


class ObjectRef(NamedTuple):
    """One object a handler depends on, as it is now (``recall().objects``). Its state for the
    handler is its existence and the source's ``fields``."""

    namespace: str | None
    name: str
    uid: str
    resource_version: str  # for the handler's information: not part of the state
    deleting: bool  # has a deletionTimestamp: going, not gone (for information: not part of the state)
    fields: tuple[object, ...] = ()  # the values of the source's fields, in their order


@dataclass(frozen=True)
class Source:
    """Where a handler's other objects are: made by :func:`owned`, :func:`referenced`, :func:`selected`."""

    #: How the objects are found: by their ownerReferences, by a field of the object, by labels.
    how: How
    #: The resource as Kopf's decorators take it: ``("batch/v1", "jobs")``, ``("secrets",)``.
    resource: tuple[str, ...]
    #: For :func:`referenced`: the path of the object's field that names them.
    field: str | None = None
    #: For :func:`selected`: the labels they carry (a value in braces is computed from the object).
    labels: tuple[tuple[str, str], ...] = ()
    #: What of each object is part of the handler's state besides its existence.
    fields: tuple[str, ...] = ()
    #: For :func:`selected`: their field paths and the values they must have (as ``labels``).
    where: tuple[tuple[str, object], ...] = ()

    @property
    def index(self) -> str:
        """The name of the Kopf index that holds these objects (one per distinct source)."""
        spec = json.dumps([self.how, self.resource, self.field, self.labels, self.fields, *(
            [self.where] if self.where else [])])
        return "kopf_outcomes_objects_" + hashlib.sha256(spec.encode()).hexdigest()[:12]

    @property
    def conditions(self) -> tuple[tuple[str, object], ...]:
        """For :func:`selected`: each field path of the objects, and its value or template."""
        return (*((paths.dotted(("metadata", "labels", key)), value) for key, value in self.labels), *self.where)

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
        cluster-wide (a resource is one or the other: the resource's own scope decides); for a
        reference that names its namespace, there."""
        metadata = body.get("metadata") or {}
        if self.how == "owned":
            return [str(metadata.get("uid", ""))]
        own = metadata.get("namespace") or ""
        scopes = list(dict.fromkeys([own, ""]))
        if self.how == "selected":
            computed = [templates.render(value, body) for _, value in self.conditions
                        if isinstance(value, str) and templates.is_template(value)]
            if any(value is None for value in computed):
                return []  # the object lacks a field its selector is made of: it selects nothing
            return [_selection_key(scope, computed) for scope in scopes]
        return [key for name in _references(paths.resolve(body, self.field or ""))
                for key in ([f"{name[0]}/{name[1]}"] if name[0] is not None else
                            [f"{scope}/{name[1]}" for scope in scopes])]

    def entries(self, body: Mapping[str, Any]) -> dict[str, ObjectRef]:
        """The keys under which the other object is indexed (and woken for), with its reference."""
        metadata = body.get("metadata") or {}
        ref = ObjectRef(metadata.get("namespace"), str(metadata.get("name", "")), str(metadata.get("uid", "")),
                        str(metadata.get("resourceVersion", "")), metadata.get("deletionTimestamp") is not None,
                        tuple(paths.resolve(body, path) for path in self.fields))
        if self.how == "owned":
            return {str(owner.get("uid")): ref for owner in metadata.get("ownerReferences") or ()
                    if isinstance(owner, Mapping) and owner.get("uid")}
        if self.how == "selected":
            found = []
            for path, value in self.conditions:
                actual = paths.resolve(body, path)
                if templates.is_template(value):
                    if actual is None:
                        return {}
                    found.append(actual)
                elif actual != value:
                    return {}
            return {_selection_key(ref.namespace or "", found): ref}
        return {f"{ref.namespace or ''}/{ref.name}": ref}


def _selection_key(scope: str, computed: list[object]) -> str:
    """Fixed labels only: the namespace (every parent there selects the same objects); with
    values computed from the parent: the namespace and those values (each parent its own)."""
    return scope if not computed else f"{scope}/{json.dumps(computed, sort_keys=True, default=str)}"


def _references(value: object) -> list[tuple[str | None, str]]:
    """The (namespace or None, name) of each object a field names: a name, ``"namespace/name"``,
    ``{"name": ..., "namespace": ...}`` (no namespace: the object's own), or a list of these."""
    found: list[tuple[str | None, str]] = []
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, str) and item:
            namespace, _, name = item.rpartition("/")
            if name:
                found.append((namespace or None, name))
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str) and item["name"]:
            given = item.get("namespace")
            found.append((given if isinstance(given, str) and given else None, item["name"]))
    return found


def owned(*resource: str, fields: Iterable[paths.Path] = ()) -> Source:
    """The objects of this resource that the object owns (their ``ownerReferences``; ``kopf.adopt``).

    By default an object's state is that it exists; ``fields`` adds field paths
    (``fields=["status.succeeded"]``: a Job finishing wakes the handler;
    ``fields=["metadata.deletionTimestamp"]``: one marked for deletion does)."""
    return Source("owned", _resource(resource, "owned"), fields=_paths(fields, "owned", "fields"))


def referenced(*resource: str, field: paths.Path, fields: Iterable[paths.Path] = ()) -> Source:
    """The objects of this resource named by ``field`` of the object: a name (in the object's
    namespace), ``"namespace/name"``, ``{"name": ..., "namespace": ...}``, or a list of these:
    ``referenced("v1", "secrets", field="spec.secretRef")``. Objects in other namespaces are found
    where the operator watches them (``--all-namespaces``, or a ``--namespace`` for each)."""
    [field] = _paths([field], "referenced", "field")
    return Source("referenced", _resource(resource, "referenced"), field=field,
                  fields=_paths(fields, "referenced", "fields"))


def selected(*resource: str, labels: Mapping[str, str] | None = None, where: Mapping[paths.Path, object] | None = None,
             fields: Iterable[paths.Path] = ()) -> Source:
    """The objects of this resource in the object's namespace with these labels, and/or with
    these values at these field paths (``where``). A value may be computed from the object with
    placeholders of its field paths, so that each object selects its own:

        selected("batch/v1", "jobs", labels={"example.com/cluster": "{metadata.name}"})
        selected("v1", "configmaps", where={"spec.clusterName": "{metadata.name}"})

    Each object is indexed under the values it carries, so an object finds its own in one look-up,
    and a change wakes only the object(s) it belongs to (before and after the change)."""
    if labels is not None and (not isinstance(labels, Mapping) or not all(
            isinstance(key, str) and key and isinstance(value, str) for key, value in labels.items())):
        raise ValueError(f"selected(): labels must be a mapping of strings, not {labels!r}")
    if where is not None and not isinstance(where, Mapping):
        raise ValueError(f"selected(): where must be a mapping of field paths to values, not {where!r}")
    if not labels and not where:
        raise ValueError("selected(): give labels (a non-empty mapping of strings), where, or both")
    for key, label in (labels or {}).items():
        if templates.is_template(label):
            templates.check(label, f"selected(): labels[{key!r}]")
    conditions: list[tuple[str, object]] = []
    for path, value in (where or {}).items():
        [canonical] = _paths([path], "selected", "where")
        if isinstance(value, str) and templates.is_template(value):
            templates.check(value, f"selected(): where[{canonical!r}]")
        elif value is None or isinstance(value, (Mapping, list)):
            raise ValueError(f"selected(): where[{canonical!r}] must be a value or a template such as"
                             f" '{{metadata.name}}', not {value!r}")
        conditions.append((canonical, value))
    return Source("selected", _resource(resource, "selected"), labels=tuple(sorted((labels or {}).items())),
                  fields=_paths(fields, "selected", "fields"),
                  where=tuple(sorted(conditions, key=lambda condition: condition[0])))


def _paths(found: Iterable[paths.Path], name: str, argument: str) -> tuple[str, ...]:
    return paths.canonical_all(found, f"{name}(): {argument}")


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
    keys = _wake_keys(body)
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


def _wake_keys(body: Mapping[str, Any]) -> tuple[str, ...]:
    metadata = body.get("metadata") or {}
    namespace = metadata.get("namespace") or ""
    owners = metadata.get("ownerReferences")
    keys = [f"uid:{owner.get('uid')}" for owner in owners if isinstance(owner, Mapping)] \
        if isinstance(owners, list) else []
    keys.append(f"ref:{namespace}/{metadata.get('name', '')}")
    keys.extend(f"sel:{index}:{key}" for index, source in _selectors.items() for key in source.entries(body))
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

    # Kopf filters by the fixed labels, and by the presence of those computed from the parent.
    labels = {key: kopf.PRESENT if templates.is_template(value) else value for key, value in source.labels}
    kopf.index(*source.resource, id=source.index, registry=registry, labels=labels or None)(index)
