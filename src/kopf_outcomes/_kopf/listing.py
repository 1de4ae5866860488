"""
Whether Kopf has listed an indexed resource everywhere it watches it: only then is an index
complete, and "no objects" means none (unknown is not none). Kopf holds the objects of a listing under
way, but not those of a watcher that was ready before (a cluster-scoped parent, a reference into a new
namespace): ``dependents.take`` holds those handlers. The cases (a listing under way, an ended or an
unwatched namespace, a refused listing) are docs/howto/wait-for-objects.md's "When the objects are
unknown"; :func:`unlisted`, :func:`unwatched`, :func:`watched` and :func:`_gone` tell each.
"""
from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any, NamedTuple

from kopf_outcomes._kopf import selection
from kopf_outcomes._kopf.internals import APIForbiddenError, index_ids, processor_keywords

_LOGGER = logging.getLogger("kopf_outcomes")
OWN_INDEX_PREFIX = "kopf_outcomes_objects_"  # objects.Source.index: the indices of depends_on_objects


class _Listing(NamedTuple):
    """A watcher of an indexed resource that has not listed it yet."""

    index_ids: frozenset[str]  # the indices its objects fill
    what: str  # the resource and where, as the messages say it
    indexed: Any  # Kopf's readiness of the operator's indices (a ToggleSet)
    toggle: Any  # this watcher's toggle in it: Kopf drops it when the listing is over


_listings: dict[int, _Listing] = {}
_tokens = itertools.count()


async def watched(original: Callable[..., Awaitable[None]], kwargs: dict[str, Any]) -> None:
    """Kopf's watcher, known here until it has listed its resource (an indexed one only)."""
    toggle, indexed = kwargs.get("resource_indexed"), kwargs.get("operator_indexed")
    registry = processor_keywords(kwargs.get("processor")).get("registry")
    if toggle is None or indexed is None or registry is None:
        return await original(**kwargs)
    resource, namespace = kwargs["resource"], kwargs.get("namespace")
    what = f"{resource.plural} ({resource.group or 'core'}/{resource.version})" + (
        f" in namespace {namespace!r}" if namespace is not None else " cluster-wide")
    ids, own = index_ids(registry, resource), own_indices(registry, resource) or frozenset()
    selection.watched(kwargs.get("settings"), resource, own)
    _watching.add(True)
    for index_id in own:
        _scopes.setdefault(index_id, set()).add(namespace)
        _ended.get(index_id, set()).discard(namespace)
        _namespaced[index_id] = bool(getattr(resource, "namespaced", True))
        _resources[index_id] = resource
    token = next(_tokens)
    _listings[token] = _Listing(ids, what, indexed, toggle)
    try:
        await original(**kwargs)
    except APIForbiddenError as e:
        if own:
            _LOGGER.error(forbidden(resource, namespace, what, e))
        raise
    finally:
        _listings.pop(token, None)
        if namespace is not None:  # a namespace's watcher: the namespace (or the resource) went
            for index_id in own:
                _ended.setdefault(index_id, set()).add(namespace)


def wrap_revise_namespaces(original: Callable[..., None]) -> Callable[..., None]:
    """Kopf's revision of the namespaces that exist (its namespace observer), known here."""
    def revise_namespaces(*args: Any, **kwargs: Any) -> None:
        insights = kwargs.get("insights")
        if insights is not None:
            _insights[:] = [insights]
        return original(*args, **kwargs)
    return revise_namespaces


def own_indices(registry: Any, resource: Any) -> frozenset[str] | None:
    """The indices of ours that the objects of this resource fill (Kopf's own matching of the
    resource: what their changes wake); None where unknown."""
    if registry is None or resource is None:
        return None
    return frozenset(index_id for index_id in index_ids(registry, resource) if index_id.startswith(OWN_INDEX_PREFIX))


def forbidden(resource: Any, namespace: str | None, what: str, error: BaseException) -> str:
    where = f"in namespace {namespace!r}" if namespace is not None else "cluster-wide"
    grant = "a Role and a RoleBinding" if namespace is not None else "a ClusterRole and a ClusterRoleBinding"
    return (f"The operator may not list and watch {what}, which handlers depend on (depends_on_objects): "
            f"their objects are unknown, so those handlers are held and their objects keep their finalizers "
            f"(Kopf stops the operator). Grant it the verbs 'list' and 'watch' on {resource.plural!r} of the "
            f"API group {resource.group!r} {where} ({grant}). The API server said: {error}")


def unlisted(ids: Collection[str]) -> list[str]:
    """The listings still under way of the resources whose objects fill these indices (the
    watchers not ready yet): their indices are incomplete. Nothing to look at, most of the time."""
    if not _listings:
        return []
    found = []
    for token, listing in list(_listings.items()):
        if listing.toggle not in listing.indexed:
            del _listings[token]  # listed: for good (a later listing is Kopf's relisting of a full index)
        elif not listing.index_ids.isdisjoint(ids):
            found.append(listing.what)
    return found


# Where Kopf watches the resource of each of our indices: the namespaces of its watchers (None:
# cluster-wide), as they started in this process (a namespace deleted since stays: its objects are
# gone, none is the truth there). Filled before any handler runs: Kopf lists every indexed resource
# first. No watcher at all (a set: one flag): processing driven without Kopf's watchers, which
# vouch for nothing.
_scopes: dict[str, set[str | None]] = {}
_watching: set[bool] = set()
_namespaced: dict[str, bool] = {}  # whether the resource of each watched index is namespaced (Kopf's resource)
_resources: dict[str, Any] = {}  # the resource of each watched index (Kopf's)
_ended: dict[str, set[str]] = {}  # the namespaces whose watcher of each index ended, not started again
_insights: list[Any] = []  # Kopf's insights (its namespaces, its watched resources), once it revised them


def _gone(index: str, namespace: str) -> bool:
    """Whether the namespace whose watcher of this index ended is known gone, or the resource is:
    Kopf's insights no longer have it (unknown without them)."""
    if not _insights:
        return False
    insights = _insights[0]
    return (namespace not in getattr(insights, "namespaces", {namespace})
            or _resources.get(index) not in getattr(insights, "watched_resources", {_resources.get(index)}))


def namespaced(index: str) -> bool:
    """Whether the resource of this index is namespaced, as its watcher said (False where no watcher
    said it: :func:`unwatched` judges an index watched nowhere)."""
    return _namespaced.get(index, False)


def unwatched(index: str, namespaces: Collection[str] | None) -> tuple[str, str] | None:
    """Where objects of this index may be that Kopf does not watch, and how to make it watch them
    (None: it watches them all), of those in ``namespaces`` (None: any namespace; "": cluster-scoped,
    watched cluster-wide)."""
    scope = _scopes.get(index, set())
    if not _watching or None in scope:
        return None
    if not scope:
        return ("no namespace: no watcher serves the resource", "Its resource is not served or not watched: "
                "install its CRD, grant the operator 'list' and 'watch' on it (RBAC), or remove that source.")
    watched = f"watched in {', '.join(map(repr, sorted(filter(None, scope))))}"
    if namespaces is None:
        return (f"any namespace ({watched})", "A cluster-scoped object's children and selections may be in "
                "any namespace: run the operator cluster-wide (--all-namespaces), or depend on them from a "
                "namespaced object.")
    missing = [namespace for namespace in namespaces if namespace and namespace not in scope]
    if missing:
        return (f"namespace {', '.join(map(repr, missing))} ({watched})", "Run the operator with a --namespace for "
                "that namespace too, or with --all-namespaces (cluster-wide).")
    back = [namespace for namespace in namespaces if namespace in _ended.get(index, ()) and not _gone(index, namespace)]
    if back:
        return (f"namespace {', '.join(map(repr, back))} (its watcher ended: the namespace exists again, or may)",
                "Kopf starts a new watcher when it sees the namespace; this is looked at again every minute.")
    return None
