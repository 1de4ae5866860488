"""
Per-state handler memory: what state each handler last acted on, and what it concluded.

The memory lives in one annotation of the object per operator, so it survives restarts and is
written in the same PATCH as Kopf's own progress. Its prefix ends in ``.kopf.zalando.org``,
which every Kopf operator treats as Kopf's own storage: writing it never looks like a change of
the object to Kopf, and never wakes anyone here either.

One operator's memory is its own: the key is derived from the operator's Kopf finalizer
(``settings.persistence.finalizer``), which Kopf requires to differ between operators that serve
one resource. The default finalizer keeps the historical key ``outcomes.kopf.zalando.org/memory``.

Reading never raises: any value (any JSON, any size, any depth) that is not a valid memory is
reported once and read as no memory.
"""
from __future__ import annotations

import collections
import dataclasses
import datetime
import hashlib
import json
import logging
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any, Literal, NamedTuple, TypedDict, cast

from kopf_outcomes import bounded, values
from kopf_outcomes.objects import ObjectRef

__all__ = ["DEFAULT_KEYS", "Memory", "MemoryKeys", "MemoryRecord", "keys_for", "parse", "read",
           "consume_release", "own", "release_answers", "record", "release_requested", "release_value", "write"]

PREFIX = "outcomes.kopf.zalando.org"
DEFAULT_FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
MEMORY_ANNOTATION = f"{PREFIX}/memory"  # the default operator's keys
RELEASE_ANNOTATION = f"{PREFIX}/release"


StoredOutcome = Literal["pending", "retry", "success", "fatal", "retained"]
STORED_OUTCOMES: frozenset[str] = frozenset({"pending", "retry", "success", "fatal", "retained"})

# What we store is bounded, so that a long reason never makes the object too big to PATCH.
MAX_REASON = 1024
TRUNCATED = " [truncated]"


class _Conclusion(TypedDict):
    digest: str
    outcome: StoredOutcome
    reason: str


class MemoryRecord(_Conclusion, total=False):
    """
    What one handler concluded about one state of the object: a dict (as stored in the object's
    annotation) with these keys. Read them with ``record["outcome"]``, the optional ones with
    ``record.get("recheck")``.

    Always present:

    ``digest`` (str)
        The digest of the state the handler concluded about: the object as its cycle's patch leaves it.
    ``outcome`` (str)
        What it concluded: ``"pending"``, ``"retry"``, ``"success"``, ``"fatal"`` or ``"retained"``.
    ``reason`` (str)
        The outcome's reason, at most 1024 characters (a longer one is cut and ends with
        ``[truncated]``).

    Present when they apply:

    ``before_status`` (str)
        The digest of that state as the cycle's patch leaves it without its part in ``status``,
        where that differs: the object shows it with this record where the status write did not
        land (a kill between Kopf's PATCH of the object and its ``/status`` PATCH, or a field the
        API server prunes). The record is about either state, and no other.
    ``since`` (str)
        When this conclusion began (UTC, ISO 8601); kept while the same conclusion holds.
    ``depends_on`` (list[str])
        The fields whose change wakes the handler; absent: the default scope.
    ``ignore`` (list[str])
        The fields left out of its state (the ``ignore`` option); absent: none.
    ``parked`` (bool)
        True for a Pending without recheck, or a retained finalizer: it waits for a change.
    ``recheck`` (float)
        A Pending's recheck: it runs again at ``since`` + k × ``recheck`` seconds.
    ``objects`` (str)
        The fingerprint of its other objects (``depends_on_objects``) when it was stored.
    ``woken_by`` (list[list[str]])
        The field paths whose change woke its last runs (a few, the latest last).
    ``deadline`` (str)
        A Pending under a time-based escalation runs again then (UTC, ISO 8601), whatever happens;
        a retained handler whose release an observer failed on attempts the release again then
        (not before), while the release annotation still answers it.
    ``uid`` (str)
        The uid of the object it was written for: a restored or re-created object (another uid)
        does not inherit it.
    ``key`` (str)
        The idempotency key the handler acted under: kept while the state is the one it acted on,
        whatever the handler, Kopf or an upgrade wrote since (see :class:`Memory`).
    ``seen`` (list[dict])
        Its other objects when it was stored, for ``why``: per source, its resource, how, tracked
        fields and objects (``kopf_outcomes.objects.described``; read, never compared).
    ``ignored_release`` (str)
        A waiting (retained or pending) handler's: the release annotation's value already there when
        it began to wait (and still answering a retention before it): that value releases none of
        it. It goes when that annotation does.
    ``stamp`` (str)
        A retained handler's: made as it is retained, and carried by the release that answers this
        retention (``<handler>@<stamp>``), so that no release set before it, or without knowing
        of it, can release it.
    ``released_by`` (str)
        A retained parent's whose release through its retained sub-handler is retried (an observer
        failed on it): the release annotation's entry that released that sub-handler (its release
        concluded, its record gone). The parent's release stands while the annotation carries it.
    ``acted`` (bool)
        False for a ``retry`` that concluded nothing about its state (a Retry or error with no
        conclusion before it) whose run was given its key (``recall()``): the record keeps that key
        for the state the cycle left, and ``acted_on_this_state`` stays False.
        Absent: True.
    """

    before_status: str
    since: str
    depends_on: list[str]
    ignore: list[str]
    parked: bool
    recheck: float
    objects: str
    woken_by: list[list[str]]
    deadline: str
    uid: str
    key: str
    seen: list[dict[str, Any]]
    ignored_release: str
    stamp: str
    released_by: str
    acted: bool


@dataclasses.dataclass(frozen=True)
class Memory:
    """
    What a running handler remembers (``kopf_outcomes.recall()``): its previous conclusion, and
    whether that was about the state it sees now.

    A Pending handler runs again on a recheck or when its state changes; a side effect such as
    "start the external process" must happen once per state, not once per run. The memory is
    written when the handler concludes, so a crash during the side effect repeats it: pass
    ``idempotency_key`` to the external system, which can then ignore the repetition.

        memory = kopf_outcomes.recall()
        if not memory.acted_on_this_state:
            start_external_process(request_id=memory.idempotency_key)
        return kopf_outcomes.Pending("waiting for the callback")
    """

    #: What this handler concluded last time (its stored record), or None if nothing.
    previous: MemoryRecord | None
    #: The digest of the state this run sees: the part of the object the handler depends on.
    digest: str
    #: Stable per object, handler and state: what an external system can deduplicate on.
    idempotency_key: str
    #: With :func:`~kopf_outcomes.depends_on_objects`: the other objects as they are now.
    objects: tuple[ObjectRef, ...] = ()
    #: The fingerprint of ``objects``; None without ``depends_on_objects``.
    objects_digest: str | None = None
    #: The fingerprint of the objects the previous conclusion was about; None without it.
    previous_objects_digest: str | None = None
    #: The digest of the state this run sees, in the scope the previous conclusion was about (its
    #: ``depends_on``, ``ignore``), where an upgrade changed the scope since: the comparison is made
    #: in that scope, and a change outside it made before the upgrade is not seen (not None says
    #: so). None: the scope is the same.
    previous_scope_digest: str | None = None

    @property
    def acted_on_this_state(self) -> bool:
        """Whether the previous conclusion was about the state this run sees (its object, and
        its other objects): then a side effect started for it must not be started again."""
        return self.about_this_state and self.previous is not None and self.previous.get("acted", True)

    @property
    def about_this_state(self) -> bool:
        """Whether the previous record is about the state this run sees (its object, and its other
        objects), whether or not it concluded anything: then its key is this state's."""
        seen = self.digest if self.previous_scope_digest is None else self.previous_scope_digest
        return (self.previous is not None and about(self.previous, seen)
                and self.previous_objects_digest == self.objects_digest)


def about(record: Mapping[str, Any], state_digest: str) -> bool:
    """Whether a record is about the state of this digest: the state its cycle's patch leaves, or
    that state without the cycle's write into ``status`` (``before_status``), the two states the
    object can show with the record landed. Nothing else: no state that changed otherwise."""
    return record["digest"] == state_digest or record.get("before_status") == state_digest


class MemoryKeys(NamedTuple):
    """The annotations of one operator: its memory, and the one a person sets to release."""

    memory: str
    release: str


def keys_for(finalizer: str | None) -> MemoryKeys:
    """The annotation keys of the operator whose Kopf finalizer this is."""
    if not finalizer or finalizer == DEFAULT_FINALIZER:
        return MemoryKeys(MEMORY_ANNOTATION, RELEASE_ANNOTATION)
    suffix = hashlib.sha256(finalizer.encode()).hexdigest()[:10]
    return MemoryKeys(f"{MEMORY_ANNOTATION}.{suffix}", f"{RELEASE_ANNOTATION}.{suffix}")


DEFAULT_KEYS = keys_for(None)
_MAX_REPORTED = 1000
_reported_garbage: collections.OrderedDict[tuple[str, str], None] = collections.OrderedDict()


def read(body: Mapping[str, Any], logger: logging.Logger | logging.LoggerAdapter[Any],
         keys: MemoryKeys = DEFAULT_KEYS) -> dict[str, MemoryRecord]:
    """All handlers' records of this object; garbage is reported once and read as no memory."""
    annotations = (body.get("metadata") or {}).get("annotations")  # runs for every handler run
    if not annotations or keys.memory not in annotations:
        return {}
    raw = annotations[keys.memory]
    try:
        return parse(raw)
    except ValueError as e:
        _report_once(body, raw, f"Ignoring the unreadable handler memory in {keys.memory!r}: {e}. "
                                f"Handlers of this object start with no memory.", logger)
        return {}


def own(records: dict[str, MemoryRecord], body: Mapping[str, Any]) -> dict[str, MemoryRecord]:
    """The records written for this object: one restored from a backup or copied into a re-created
    object (another uid) concluded nothing about this one. A record with no uid (written before
    records carried one) is the object's."""
    uid = (body.get("metadata") or {}).get("uid")
    if not uid or all(record.get("uid", uid) == uid for record in records.values()):
        return records
    return {handler_id: record for handler_id, record in records.items() if record.get("uid", uid) == uid}


def _report_once(body: Mapping[str, Any], raw: object, message: str,
                 logger: logging.Logger | logging.LoggerAdapter[Any]) -> None:
    """Warn once per object and value; remember a bounded number of (uid, value digest) pairs."""
    uid = str((body.get("metadata") or {}).get("uid"))
    seen = (uid, hashlib.sha256(repr(raw).encode(errors="replace")).hexdigest())
    if seen in _reported_garbage:
        return
    bounded.remember(_reported_garbage, seen, None, _MAX_REPORTED)
    logger.warning(message)


def parse(raw: object) -> dict[str, MemoryRecord]:
    """The records in an annotation's value; ValueError saying why for anything else."""
    if not isinstance(raw, str):
        raise ValueError(f"expected a JSON string, got {type(raw).__name__}")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg} at position {e.pos})") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object of handler ids, got {type(data).__name__}")
    for handler_id, record in data.items():
        if not _valid(record):
            shown = json.dumps(record)[:80] if not isinstance(record, (dict, list)) else type(record).__name__
            raise ValueError(f"the record of handler {handler_id[:80]!r} is malformed ({shown})")
    return cast(dict[str, MemoryRecord], data)


def _valid(record: object) -> bool:
    if not isinstance(record, dict):
        return False
    outcome, depends_on = record.get("outcome"), record.get("depends_on", [])
    return (isinstance(record.get("digest"), str)
            and isinstance(record.get("before_status", ""), str)
            and isinstance(outcome, str) and outcome in STORED_OUTCOMES
            and isinstance(record.get("reason"), str)
            and isinstance(record.get("since", ""), str)
            and isinstance(record.get("parked", False), bool)
            and ("recheck" not in record or _recheck(record["recheck"]))
            and isinstance(record.get("objects", ""), str)
            and _woken_by(record.get("woken_by", []))
            and isinstance(record.get("deadline", ""), str)
            and isinstance(record.get("uid", ""), str)
            and isinstance(record.get("key", ""), str)
            and _seen(record.get("seen", []))
            and isinstance(record.get("ignored_release", ""), str)
            and isinstance(record.get("stamp", ""), str)
            and isinstance(record.get("released_by", ""), str)
            and isinstance(record.get("acted", True), bool)
            and _paths(depends_on) and _paths(record.get("ignore", [])))


def _paths(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(path, str) for path in value)


def _seen(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _woken_by(value: object) -> bool:
    return isinstance(value, list) and all(
        isinstance(paths, list) and all(isinstance(path, str) for path in paths) for paths in value)


def _recheck(value: object) -> bool:
    try:
        values.recheck(value)
    except (TypeError, ValueError):
        return False
    return True


def stored_reason(reason: str) -> str:
    """The reason as the memory keeps it: bounded (a longer one ends with a mark)."""
    return reason if len(reason) <= MAX_REASON else reason[:MAX_REASON - len(TRUNCATED)] + TRUNCATED


def record(previous: MemoryRecord | None, *, digest: str, outcome: StoredOutcome, reason: str,
           before_status: str | None = None,
           parked: bool, depends_on: Sequence[str] | None, ignore: Sequence[str] | None = None,
           recheck: float | None = None,
           objects: str | None = None, woken_by: list[list[str]] | None = None,
           deadline: str | None = None, uid: str | None = None, key: str | None = None,
           seen: list[dict[str, Any]] | None = None, ignored_release: str | None = None,
           stamp: str | None = None, acted: bool = True) -> MemoryRecord:
    """A new record; ``since`` is kept from the previous one while the conclusion holds, and its
    ``before_status`` while it is about the same state (a cycle that wrote nothing new into its
    status makes none: a recheck that concludes as before stores nothing)."""
    reason = stored_reason(reason)
    same = (previous is not None and previous["outcome"] == outcome and previous["reason"] == reason
            and previous.get("recheck") == recheck)
    since = previous.get("since") if same and previous is not None else None
    new = MemoryRecord(digest=digest, outcome=outcome, reason=reason,
                       since=since or datetime.datetime.now(datetime.timezone.utc).isoformat())
    if before_status is None and previous is not None and previous["digest"] == digest:
        before_status = previous.get("before_status")
    if before_status is not None and before_status != digest:
        new["before_status"] = before_status
    if parked:
        new["parked"] = True
    if depends_on is not None:
        new["depends_on"] = list(depends_on)
    if ignore:
        new["ignore"] = list(ignore)
    if recheck is not None:
        new["recheck"] = recheck
    if objects is not None:
        new["objects"] = objects
    if woken_by:
        new["woken_by"] = woken_by
    if deadline is not None:
        new["deadline"] = deadline
    if uid:
        new["uid"] = uid
    if key is not None:
        new["key"] = key
    if seen is not None:
        new["seen"] = seen
    if ignored_release is not None:
        new["ignored_release"] = ignored_release
    if stamp is not None:
        new["stamp"] = stamp
    if not acted:
        new["acted"] = False
    return new


def write(
    body: Mapping[str, Any],
    patch: MutableMapping[str, Any],
    handler_id: str,
    new: MemoryRecord | None,
    logger: logging.Logger | logging.LoggerAdapter[Any],
    keys: MemoryKeys = DEFAULT_KEYS,
    known: Mapping[str, MemoryRecord] | None = None,
) -> None:
    """Put one handler's record (or its removal) into the pending merge-patch, if it changes.
    ``known`` is the body's memory if the caller has read it already (once per cycle)."""
    patched = patch.get("metadata", {}).get("annotations", {})
    if keys.memory in patched:
        pending = patched[keys.memory]
        records = parse(pending) if pending is not None else {}
    else:
        records = dict(known) if known is not None else read(body, logger, keys)
    if records.get(handler_id) == new:
        return
    if new is None:
        if handler_id not in records:
            return
        records.pop(handler_id)
    else:
        records[handler_id] = new
    value = json.dumps(records, sort_keys=True, separators=(",", ":")) if records else None
    patch.setdefault("metadata", {}).setdefault("annotations", {})[keys.memory] = value


def release_requested(body: Mapping[str, Any], handler_id: str, keys: MemoryKeys = DEFAULT_KEYS) -> bool:
    """Whether the release annotation names this handler (or ``*``), with a stamp or without."""
    return any(name in (handler_id, "*") for name, _ in _releases(body, keys))


def release_answers(body: Mapping[str, Any], handler_id: str, record: MemoryRecord,
                    keys: MemoryKeys = DEFAULT_KEYS) -> bool:
    """Whether the release annotation releases this retained handler: it names it with the stamp of
    this retention (``<handler>@<stamp>``), which exists only from the retention on; and it is not
    the one already there when the handler was retained (``ignored_release``). A retention recorded
    without a stamp (by a version before stamps) is answered by its name, or ``*``, as it was then."""
    value = ((body.get("metadata") or {}).get("annotations") or {}).get(keys.release)
    if record.get("ignored_release") == value:
        return False
    return _answers(body, handler_id, record.get("stamp"), keys)


def release_carries(body: Mapping[str, Any], entry: str, keys: MemoryKeys = DEFAULT_KEYS) -> bool:
    """Whether the release annotation still carries an entry that released a retention (as
    :func:`release_value` made it): as it answered that retention, stamped or not."""
    handler_id, sep, stamp = entry.rpartition("@")
    return _answers(body, handler_id, stamp, keys) if sep else _answers(body, entry, None, keys)


def _answers(body: Mapping[str, Any], handler_id: str, stamp: str | None, keys: MemoryKeys) -> bool:
    if stamp is None:
        return release_requested(body, handler_id, keys)
    value = ((body.get("metadata") or {}).get("annotations") or {}).get(keys.release)
    # The whole value too: the one the log gives for a handler whose id has a ",".
    return (handler_id, stamp) in _releases(body, keys) or (
        isinstance(value, str) and value.strip() == f"{handler_id}@{stamp}")


def release_value(handler_id: str, record: Mapping[str, Any]) -> str:
    """The release annotation's value that answers this retention (what the logs and ``why`` print)."""
    stamp = record.get("stamp")
    return f"{handler_id}@{stamp}" if isinstance(stamp, str) else handler_id


def _releases(body: Mapping[str, Any], keys: MemoryKeys) -> set[tuple[str, str | None]]:
    """The release annotation's entries, comma-separated: ``<handler>@<stamp>``, or an unstamped name."""
    value = ((body.get("metadata") or {}).get("annotations") or {}).get(keys.release)
    if not isinstance(value, str):
        return set()
    entries = (entry.strip().rpartition("@") for entry in value.split(","))
    return {(name, stamp) if sep else (stamp, None) for name, sep, stamp in entries}


def consume_release(body: Mapping[str, Any], patch: MutableMapping[str, Any], keys: MemoryKeys = DEFAULT_KEYS) -> None:
    """A release answers one retention: used (or found a leftover), it goes in the same PATCH, so that
    it releases no handler retained later (``*`` releases what is retained at the time)."""
    if keys.release in ((body.get("metadata") or {}).get("annotations") or {}):
        patch.setdefault("metadata", {}).setdefault("annotations", {})[keys.release] = None


def idempotency_key(uid: str, handler_id: str, digest: str) -> str:
    """Stable per object, handler and state: what an external system can deduplicate on."""
    return hashlib.sha256(f"{uid}\0{handler_id}\0{digest}".encode()).hexdigest()[:32]
