"""
Where a handler's other objects are (``depends_on_objects``' sources): owned children, objects
a field names (in any namespace), objects selected by labels or fields, fixed or computed from
the object. Each source says under which keys Kopf's index holds an object, and which keys an
object looks up: a parent finds its own in one look-up, and a change wakes only its parents.
"""
from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from kopf_outcomes import paths, templates

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
    #: The values of the source's ``fields``, in their order (None where a field is absent). Where
    #: several sources name the object: the first source's, then the paths only later ones name.
    fields: tuple[object, ...] = ()
    #: The field paths of ``fields``, position by position (canonical: ``kopf_outcomes.paths.canonical``).
    paths: tuple[str, ...] = ()

    def field(self, path: str | Sequence[str]) -> object:
        """The value of one of the sources' ``fields`` by its path (None where it is absent):
        ``job.field("status.succeeded")``. KeyError if no source of the object asked for it."""
        wanted = paths.canonical(path)
        if wanted not in self.paths:
            raise KeyError(f"{wanted!r} is not one of the fields of {self.name!r} (its sources ask for "
                           f"{', '.join(map(repr, self.paths)) or 'none'}): add it to a source's fields=")
        return self.fields[self.paths.index(wanted)]


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

    def within(self, label_selector: str) -> bool:
        """Whether every object of this source has the labels that the API server selects for the
        operator's watch of its resource (Kopf's ``settings.watching.label_selectors``): only where
        each term of the selector is one of the source's fixed labels (``key=value``). Else some of
        its objects may go unseen."""
        fixed = {(key, value) for key, value in self.labels if not templates.is_template(value)}
        for term in filter(None, (term.strip() for term in label_selector.split(","))):
            key, sep, value = term.replace("==", "=").partition("=")
            if not sep or key.endswith("!") or (key.strip(), value.strip()) not in fixed:
                return False
        return True

    def wake_keys(self, body: Mapping[str, Any]) -> list[str]:
        """What wakes the dependent object (the parent): a change of an object that is or was
        under one of its keys in this source's index (see :func:`changed`). A key names the
        index, hence the resource: a ConfigMap named like a referenced Secret wakes no one."""
        return [f"{self.index}:{key}" for key in self.keys(body)]

    def namespaces(self, body: Mapping[str, Any]) -> tuple[str, ...] | None:
        """Where the dependent object's (the parent's) objects may be: its namespace for its
        children and selections; the namespaces its references name ("" for a cluster-scoped
        object); None for any namespace (the children and selections of a cluster-scoped object)."""
        own = (body.get("metadata") or {}).get("namespace") or ""
        if self.how != "referenced":
            return (own,) if own else None
        return tuple(dict.fromkeys(key.partition("/")[0] for key in self.keys(body)))

    def keys(self, body: Mapping[str, Any]) -> list[str]:
        """The keys of the dependent object (the parent) into the index: in its namespace, and
        cluster-wide (a resource is one or the other: the resource's own scope decides); for a
        reference that names its namespace, there; for a selection by a cluster-scoped object, in
        every namespace (:data:`EVERYWHERE`)."""
        metadata = body.get("metadata") or {}
        if self.how == "owned":
            return [str(metadata.get("uid", ""))]
        own = metadata.get("namespace") or ""
        if self.how == "selected":
            scopes = [own, ""] if own else [EVERYWHERE]
            computed = [templates.render(value, body) for _, value in self.conditions
                        if isinstance(value, str) and templates.is_template(value)]
            if any(value is None or isinstance(value, (Mapping, list)) for value in computed):
                return []  # the object lacks a field its selector is made of: it selects nothing
            labelled = sum(templates.is_template(value) for _, value in self.labels)
            computed = [str(value) if index < labelled else value for index, value in enumerate(computed)]
            return [_selection_key(scope, computed) for scope in scopes]
        scopes = list(dict.fromkeys([own, ""]))
        return [key for name in _references(paths.resolve(body, self.field or ""))
                for key in ([f"{name[0]}/{name[1]}"] if name[0] is not None else
                            [f"{scope}/{name[1]}" for scope in scopes])]

    def entries(self, body: Mapping[str, Any]) -> dict[str, ObjectRef]:
        """The keys under which the other object is indexed (and woken for), with its reference."""
        metadata = body.get("metadata") or {}
        ref = ObjectRef(metadata.get("namespace"), str(metadata.get("name", "")), str(metadata.get("uid", "")),
                        str(metadata.get("resourceVersion", "")), metadata.get("deletionTimestamp") is not None,
                        tuple(paths.resolve(body, path) for path in self.fields), self.fields)
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
            return {_selection_key(scope, found): ref for scope in (ref.namespace or "", EVERYWHERE)}
        return {f"{ref.namespace or ''}/{ref.name}": ref}


# The scope of a selection under which every object is also indexed, in whatever namespace it is:
# a cluster-scoped object selects its objects in every namespace (no namespace is named "*").
EVERYWHERE = "*"


def _selection_key(scope: str, computed: list[object]) -> str:
    """Fixed labels only: the namespace (every parent there selects the same objects); with
    values computed from the parent: the namespace and those values (each parent its own).
    Interned: the objects under one key share it (Kopf keeps each object's index keys)."""
    return scope if not computed else sys.intern(f"{scope}/{json.dumps(computed, sort_keys=True, default=str)}")


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


def owned(*resource: str, fields: Iterable[str | Sequence[str]] = ()) -> Source:
    """The objects of this resource that the object owns (their ``ownerReferences``; ``kopf.adopt``).

    By default an object's state is that it exists; ``fields`` adds field paths
    (``fields=["status.succeeded"]``: a Job finishing wakes the handler;
    ``fields=["metadata.deletionTimestamp"]``: one marked for deletion does)."""
    return Source("owned", _resource(resource, "owned"), fields=_paths(fields, "owned", "fields"))


def referenced(*resource: str, field: str | Sequence[str], fields: Iterable[str | Sequence[str]] = ()) -> Source:
    """The objects of this resource named by ``field`` of the object: a name (in the object's
    namespace), ``"namespace/name"``, ``{"name": ..., "namespace": ...}``, or a list of these:
    ``referenced("v1", "secrets", field="spec.secretRef")``. Objects in other namespaces are found
    where the operator watches them (``--all-namespaces``, or a ``--namespace`` for each); where it
    does not, they are unknown, and the handler is held."""
    [field] = _paths([field], "referenced", "field")
    return Source("referenced", _resource(resource, "referenced"), field=field,
                  fields=_paths(fields, "referenced", "fields"))


def selected(*resource: str, labels: Mapping[str, str] | None = None,
             where: Mapping[str | tuple[str, ...], object] | None = None,
             fields: Iterable[str | Sequence[str]] = ()) -> Source:
    """The objects of this resource in the object's namespace (for a cluster-scoped object: in
    every namespace, and cluster-wide) with these labels, and/or with these values at these field
    paths (``where``). A value may be computed from the object with
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


def _paths(found: Iterable[str | Sequence[str]], name: str, argument: str) -> tuple[str, ...]:
    return paths.canonical_all(found, f"{name}(): {argument}")


def _resource(resource: tuple[str, ...], name: str) -> tuple[str, ...]:
    if not 1 <= len(resource) <= 3 or not all(isinstance(part, str) and part for part in resource):
        raise ValueError(f"{name}(): give the resource as Kopf's decorators take it, e.g. {name}('batch/v1',"
                         f" 'jobs') or {name}('secrets'), not {resource!r}")
    return resource
