"""
Whether Kopf has listed an indexed resource everywhere it watches it: only then is an index
complete, and "no objects" means none (unknown is not none).

Kopf itself holds every object's handlers until the indexed resources are listed when the
operator starts, and the objects of a namespace that appears later (``--namespace 'pattern*'``)
until that namespace's are. It does not hold the objects of a watcher that was ready before (a
watcher stops asking once the operator was indexed): a cluster-scoped parent of children in the
new namespace, a reference into it. ``dependents.take`` holds those handlers while
:func:`unlisted` names a listing still under way.

A listing the operator may not do (403 Forbidden) Kopf retries with its error backoffs, at ERROR
each time, and then stops the operator (its watcher fails): every finalizer stays.
:func:`watched` adds the one ERROR that names the permission to grant.
"""
from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any, NamedTuple

from kopf_outcomes._kopf import selection
from kopf_outcomes._kopf.internals import APIForbiddenError, index_ids

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
    toggle, indexed, processor = kwargs.get("resource_indexed"), kwargs.get("operator_indexed"), kwargs.get("processor")
    registry = processor.keywords.get("registry") if isinstance(processor, functools.partial) else None
    if toggle is None or indexed is None or registry is None:
        return await original(**kwargs)
    resource, namespace = kwargs["resource"], kwargs.get("namespace")
    what = f"{resource.plural} ({resource.group or 'core'}/{resource.version})" + (
        f" in namespace {namespace!r}" if namespace is not None else " cluster-wide")
    ids = index_ids(registry, resource)
    selection.watched(kwargs.get("settings"), resource, [i for i in ids if i.startswith(OWN_INDEX_PREFIX)])
    token = next(_tokens)
    _listings[token] = _Listing(ids, what, indexed, toggle)
    try:
        await original(**kwargs)
    except APIForbiddenError as e:
        if any(index_id.startswith(OWN_INDEX_PREFIX) for index_id in ids):
            _LOGGER.error(forbidden(resource, namespace, what, e))
        raise
    finally:
        _listings.pop(token, None)


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
