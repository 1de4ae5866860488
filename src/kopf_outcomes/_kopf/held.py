"""
A finalizer that Kopf would release while a deletion handler's memory says it waits: kept.

Kopf removes its finalizer from an object none of its deletion handlers match any more ("no handlers
requiring it", docs/safety.md); nobody decided that release, so it waits for the operator (shard) that
matches the object now (docs/howto/shard.md), or for a person's release. Kopf releases through
``finalizers.allow_deletion``; before 1.38 it adds to the cycle's patch before our memory's conclusion
is in it (and 1.37 passes an empty one where the handler concludes), so there nothing is kept: Kopf
releases as stock Kopf does (docs/compatibility.md). A declared shard removes no finalizer of another
shard's object (:func:`shards_resource`); Kopf queues that removal on each of their events, so a patch
that holds nothing else costs no copy and diff of the body (:func:`wrap_json_patch`).
"""
from __future__ import annotations

import collections
import contextvars
import functools
import logging
import weakref
from collections.abc import Callable, Collection, Mapping
from typing import Any

from kopf_outcomes import bounded, memory, shards
from kopf_outcomes._kopf.internals import deletion_ids, filters_by_label, operator_registry

_LOGGER = logging.getLogger("kopf_outcomes")
# A Retry's record is kept only where the handler acted on its state (a Pending before it): it waits too.
WAITING = frozenset({"pending", "retry", "retained"})

# The objects already told about (uid, held handlers): one ERROR per object and set. Bounded.
_told: collections.OrderedDict[tuple[str, tuple[str, ...]], None] = collections.OrderedDict()
TOLD_LIMIT = 65536

_wrappers: weakref.WeakSet[Callable[..., None]] = weakref.WeakSet()  # every allow_deletion of wrap()

# Whether the object of this worker is of a resource that the declared shard divides: set by Kopf's
# worker (:func:`shards_resource`); None outside it, where unknown: refused as another shard's.
sharded: contextvars.ContextVar[bool | None] = contextvars.ContextVar("kopf_outcomes_sharded", default=None)


def shards_resource(registry: Any, resource: Any) -> bool | None:
    """Whether the declared shard divides this resource: some handler of it that needs Kopf's
    finalizer filters by the shard's label (no shard: False; unknown: None, refused as sharded,
    said once per resource where its handlers filter by ``when=``)."""
    if shards.declared is None:
        return False
    if registry is None or resource is None:
        return None
    found = filters_by_label(registry, resource, shards.declared[0])
    if found is None and resource not in _unseen:
        _unseen.add(resource)
        label, value = shards.declared
        _LOGGER.error(
            f"This operator is the shard {label}={value}, and the handlers of {resource} filter by when= (or a "
            f"callable label filter) but not by labels={{{label!r}: ...}}: whether they select by the shard cannot "
            f"be seen, so the finalizer of an object of {resource} with another value of {label!r}, or none, is "
            f"never removed here (as for a sharded resource). Filter those handlers by "
            f"labels=kopf_outcomes.shard({label!r}, {value!r}) (or {{{label!r}: {value!r}}}, with when= for the rest); "
            f"a resource whose handlers do not filter at all is not sharded, and released as stock Kopf releases.")
    return found


_unseen: set[Any] = set()  # the resources whose handlers' shard cannot be seen, told once each


def _others(body: Mapping[str, Any]) -> bool:
    """Whether the object is another shard's (or waits for one): of the sharded resource only."""
    return shards.others(body) and sharded.get() is not False


def waiting(body: Mapping[str, Any], finalizer: str) -> list[str]:
    """The deletion handlers of this operator whose memory (in the body as the cycle leaves it) says
    they wait and no person released. A memory that cannot be read (a typo, a newer version's
    record) holds as one that waits, named :data:`UNREADABLE`, until it is fixed, removed, or the
    object released with ``*``; a record written for another object (another uid) holds nothing."""
    keys = memory.keys_for(finalizer)
    raw = ((body.get("metadata") or {}).get("annotations") or {}).get(keys.memory)
    if not raw:
        return []
    registry = operator_registry.get()
    ids = deletion_ids(registry) if registry is not None else None  # unknown: every record counts
    if ids is not None and not ids:
        return []  # the operator has no deletion handler left: no record could be one's
    try:
        records = memory.own(memory.parse(raw), body)
    except ValueError:
        return [] if memory.release_requested(body, UNREADABLE, keys) else [UNREADABLE]
    return sorted(handler_id for handler_id, record in records.items()
                  if record["outcome"] in WAITING
                  and (ids is None or of_deletion_handler(handler_id, ids))
                  and not released(body, handler_id, record, keys))


def of_deletion_handler(handler_id: str, ids: Collection[str]) -> bool:
    """A deletion handler's record, or one of its sub-handlers' (``<parent>/<sub>``): a "/" may also
    be in a handler's own id, so the id is matched whole before any prefix."""
    return handler_id in ids or any(handler_id.startswith(f"{parent}/") for parent in ids)


def released(body: Mapping[str, Any], handler_id: str, record: memory.MemoryRecord, keys: memory.MemoryKeys) -> bool:
    """A person's release of a waiting handler: by its name (or ``*``), not the one already there as
    it began to wait; a retained one's only with its retention's stamp, as everywhere
    (:func:`kopf_outcomes.memory.release_answers`)."""
    if record["outcome"] == "retained":
        return memory.release_answers(body, handler_id, record, keys)
    value = ((body.get("metadata") or {}).get("annotations") or {}).get(keys.release)
    return memory.release_requested(body, handler_id, keys) and record.get("ignored_release") != value


# What an unreadable memory holds: nothing a person could name but ``*``.
UNREADABLE = "*"


def wrap(original: Callable[..., None]) -> Callable[..., None]:
    """Kopf's ``finalizers.allow_deletion``, which keeps the finalizer while a handler waits."""
    def allow_deletion(*args: Any, **kwargs: Any) -> None:
        body = kwargs["body"] if "body" in kwargs else args[0]
        finalizer = kwargs.get("finalizer")
        if isinstance(body, Mapping) and isinstance(finalizer, str):
            if _others(body):
                return None  # another shard's object (or waiting for one): its finalizer is not ours to remove
            held = [] if "patch" in kwargs else waiting(body, finalizer)  # Kopf < 1.38: see the module
            if held:
                _tell(body, held, finalizer)
                return None
            if "patch" not in kwargs:  # the body that becomes the PATCH: a release is answered once
                _consume_release(body, finalizer)
        return original(*args, **kwargs)
    _wrappers.add(allow_deletion)
    return allow_deletion


def _refused_removal(fn: object) -> bool:
    """Whether ``fn`` is Kopf's queued removal of the finalizer (``partial(allow_deletion, finalizer=...)``)
    through :func:`wrap`, which refuses it for another shard's object."""
    return (isinstance(fn, functools.partial) and fn.func in _wrappers and not fn.args
            and fn.keywords.keys() == {"finalizer"} and isinstance(fn.keywords["finalizer"], str))


def wrap_json_patch(original: Callable[..., Any]) -> Callable[..., Any]:
    """Kopf's ``Patch.as_json_patch``, which finds no ops, as Kopf would after copying and diffing the
    whole body, when the patch only removes the finalizer of another shard's object (refused by
    :func:`wrap`): no merge-patch, every function such a removal, the object another shard's."""
    def as_json_patch(self: Any, *args: Any, **kwargs: Any) -> Any:
        if shards.declared is not None and not len(self):
            fns = getattr(self, "fns", None)
            body = args[0] if args else kwargs.get("body")
            body = body if body is not None else getattr(self, "_original", None)
            if fns and isinstance(body, Mapping) and all(_refused_removal(fn) for fn in fns) and _others(body):
                return []
        return original(self, *args, **kwargs)
    return as_json_patch


def _consume_release(body: Mapping[str, Any], finalizer: str) -> None:
    """The release annotation goes with the finalizer it let go (Kopf's body copy, then its PATCH)."""
    annotations = (body.get("metadata") or {}).get("annotations")
    release = memory.keys_for(finalizer).release
    if isinstance(annotations, dict) and release in annotations:
        del annotations[release]


def _tell(body: Mapping[str, Any], held: list[str], finalizer: str) -> None:
    meta = body.get("metadata") or {}
    seen = (str(meta.get("uid")), tuple(held))
    if seen in _told:
        return
    bounded.remember(_told, seen, None, TOLD_LIMIT)
    where = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
    keys = memory.keys_for(finalizer)
    if held == [UNREADABLE]:
        _LOGGER.error(
            f"Kept the finalizer {finalizer!r} of {where}: its handler memory in {keys.memory!r} cannot be "
            f"read (see the warning about it), so it cannot say whether a deletion handler still waits, and "
            f"none of this operator's handlers match the object any more to conclude afresh. Fix or remove "
            f"that annotation (the handlers whose object it is then continue), or release the object with "
            f"the annotation {keys.release}=*.")
        return
    _LOGGER.error(
        f"Kept the finalizer {finalizer!r} of {where}: its deletion handler(s) {', '.join(held)} wait "
        f"(their memory in {keys.memory!r}), but none of this operator's handlers match the object any "
        f"more (its labels, annotations or when= moved it out, e.g. to another shard). The operator whose "
        f"handlers match it now continues from that memory; if none does, give the object back its "
        f"labels, or release it with the annotation {keys.release}={held[0]} (or '*'; a retained handler "
        f"with its retention's stamp, {held[0]}@<stamp>, as `kopf-outcomes why` prints it).")
