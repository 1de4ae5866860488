"""
Which retentions a person's release answers: the release annotation read against the records of a
cycle's memory (a handler's own, its retained sub-handlers', another handler's), and a release
that waits for its retry. A forged or leftover value can only keep a finalizer, never free one.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from kopf_outcomes import memory
from kopf_outcomes._kopf import deadlines
from kopf_outcomes._kopf.cycle import EMPTY, Cycle, records_as_patched
from kopf_outcomes._kopf.internals import Cause, Handler, HandlerId, operator_resource, resource_changing_ids
from kopf_outcomes._kopf.marks import RETAINED_MARK
from kopf_outcomes.memory import MemoryRecord


def release_waits(cycle: Cycle, handler: Handler, cause: Cause, body: Mapping[str, Any], record: MemoryRecord) -> bool:
    """Whether a person's release of this retained handler waits for its retry (an observer failed on
    it), said once per retry: a deadline from another replica or a forged one would hold it silently.
    One further ahead than a retry sets it is garbage (:func:`.deadlines.far_ahead`): the release is
    attempted now, said at ERROR."""
    deadline = record.get("deadline")
    far, waits = deadlines.far_ahead(record), deadlines.retrying(record)
    said = (str((body.get("metadata") or EMPTY).get("uid") or ""), str(handler.id), str(deadline))
    if (far or waits) and said not in _SAID:
        if len(_SAID) >= 1024:
            _SAID.clear()
        _SAID.add(said)
        if far:
            cause.logger.error(f"The retry of the release of {handler} is due at {deadline}, further ahead than any "
                               f"retry is set (forged, or written by a clock far ahead): ignored, the release is "
                               f"attempted now.")
        else:
            cause.logger.warning(f"The release of {handler} by the annotation {cycle.keys.release!r} waits for its "
                                 f"retry at {deadline} (an observer failed on it); the finalizer is kept until then.")
    return waits


_SAID: set[tuple[str, str, str]] = set()  # the retries said to wait (uid, handler, deadline): once each


def unanswered_release(cycle: Cycle, handler: Handler, cause: Cause, body: Mapping[str, Any],
                       record: MemoryRecord) -> None:
    """A release that names this retained handler without its retention's stamp (the old form, ``*``,
    or another retention's stamp) cannot tell this retention from one it was not meant for: it is
    held, never released, and the ERROR says the value that releases it."""
    value = ((body.get("metadata") or {}).get("annotations") or {}).get(cycle.keys.release)
    if not memory.release_requested(body, str(handler.id), cycle.keys) or record.get("ignored_release") == value:
        return
    cause.logger.error(f"The release annotation {cycle.keys.release}={value!r} does not release {handler}: a "
                       f"release must carry the stamp of the retention it answers. To release it, annotate: "
                       f"{cycle.keys.release}={memory.release_value(str(handler.id), record)}")


def holds_retained_child(cycle: Cycle, parent_id: str) -> bool:
    """Whether a sub-handler of this parent (of any depth) retains the finalizer: the parent then
    holds it too, whatever ends the parent (a forged record can only keep a finalizer, never free one)."""
    return bool(retained_children(cycle, parent_id))


def kopf_retains_any(cycle: Cycle, cause: Cause, handler_ids: Collection[str]) -> bool:
    """Whether Kopf's own progress of any of these sub-handlers carries our retained mark: what the
    memory would say where it cannot be read (garbled, or dropped as such by an earlier cycle). A
    progress that cannot be read holds as a retained one does."""
    body, storage = getattr(cause, "body", None), cycle.settings.persistence.progress_storage
    for handler_id in handler_ids:
        try:
            progress = storage.fetch(key=HandlerId(handler_id), body=body) if body is not None else None
        except Exception:  # noqa: BLE001 - a storage of the user's: unknown
            return True
        message = (progress or EMPTY).get("message")
        if isinstance(message, str) and message.endswith(RETAINED_MARK) and not (progress or EMPTY).get("failure"):
            return True
    return False


def retained_children(cycle: Cycle, parent_id: str) -> set[str]:
    """The sub-handlers of this parent (of any depth) that retain the finalizer."""
    return {handler_id for handler_id, record in sub_records(cycle, parent_id).items()
            if record["outcome"] == "retained"}


def sub_records(cycle: Cycle, parent_id: str) -> dict[str, MemoryRecord]:
    """The records of this parent's sub-handlers (``parent/child``, any depth). A handler of the
    object's resource whose id extends the parent's with a ``/`` (``id="p/q"`` beside ``p``, matching
    the object or filtered out) is none of them; no sub-handler of the object can have such an id
    (Kopf keeps both progresses under the id)."""
    prefix, own = f"{parent_id}/", {str(handler.id) for handler in cycle.handlers}
    registry, resource = cycle.registry, operator_resource.get()
    if registry is not None and resource is not None:
        own |= resource_changing_ids(registry, resource)
    return {handler_id: record for handler_id, record in cycle.records.items()
            if handler_id.startswith(prefix) and handler_id not in own}


def child_released(cycle: Cycle, parent_id: str, body: Mapping[str, Any]) -> bool:
    """Whether a person released a retained sub-handler of this parent (of any depth)."""
    return bool(released_children(cycle, parent_id, body))


def released_children(cycle: Cycle, parent_id: str, body: Mapping[str, Any]) -> dict[str, MemoryRecord]:
    """The retained sub-handlers of this parent (of any depth) that a person released (a middle one
    through its own sub-handler too: :func:`release_granted`), their retry come."""
    retained = {handler_id: record for handler_id, record in sub_records(cycle, parent_id).items()
                if record["outcome"] == "retained"}
    granted = {handler_id for handler_id, record in retained.items()
               if release_granted(cycle, handler_id, body, record)}
    # A sub-handler's own release releases the sub-handlers retained with it, as a parent's does; a
    # middle retained only for those released is released through them, as a parent is.
    for middle in sorted(retained, key=len, reverse=True):  # the deepest first
        below = retained_children(cycle, middle)
        if middle in granted:
            granted |= below
        elif below and below <= granted:
            granted.add(middle)
    released = {}
    for handler_id in sorted(granted, key=len, reverse=True):  # below before above: each told before its middle
        waiting = retained_children(cycle, handler_id) | {handler_id}
        if not any(deadlines.retrying(retained[below]) for below in waiting):  # else it waits for that retry
            released[handler_id] = retained[handler_id]
    return released


def child_release_retried(cycle: Cycle, parent_id: str, body: Mapping[str, Any]) -> bool:
    """Whether the parent runs for a retained sub-handler's release retried (an observer failed on it),
    now due: a hold, not the parent's (like :class:`.marks.Held`), it spends none of its retries=/timeout=."""
    return any("deadline" in record for record in released_children(cycle, parent_id, body).values())


def release_stands(cycle: Cycle, handler_id: str, body: Mapping[str, Any], record: MemoryRecord) -> bool:
    """Whether a person's release of this retained handler stands (its own, or a retained sub-handler's)."""
    return release_granted(cycle, handler_id, body, record) or child_released(cycle, handler_id, body)


def release_granted(cycle: Cycle, handler_id: str, body: Mapping[str, Any], record: MemoryRecord) -> bool:
    """Whether the release annotation releases this retained handler itself: it answers its retention,
    or it still carries the entry that released the retained sub-handler it waited with (``released_by``:
    that sub-handler's release concluded, its record gone, this handler's own release retried)."""
    granted = record.get("released_by")
    return memory.release_answers(body, handler_id, record, cycle.keys) or (
        granted is not None and through_own_child(handler_id, granted)
        and memory.release_carries(body, granted, cycle.keys))


def through_own_child(handler_id: str, granted: str) -> bool:
    """Whether a ``released_by`` can be this retention's: it names a sub-handler of this handler (one
    naming another handler's entry, forged or garbled, releases nothing)."""
    child, sep, _ = granted.rpartition("@")
    return (child if sep else granted).startswith(f"{handler_id}/")


def release_answers_another(cycle: Cycle, body: Mapping[str, Any], patch: Mapping[str, Any], handler_id: str) -> bool:
    """Whether the release annotation still releases a retained handler other than this one, as the
    cycle's patch leaves the memory: ``*`` answers every handler retained when it was set, under any
    lifecycle (Kopf's default runs one handler per cycle), so it stays until the last of them goes."""
    return any(other != handler_id and record["outcome"] == "retained"
               and release_granted(cycle, other, body, record)
               for other, record in records_as_patched(cycle, patch).items())
