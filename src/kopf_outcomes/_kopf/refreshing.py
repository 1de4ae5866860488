"""
The memory as a cycle's patch leaves it: each record about the state the cycle writes (the
operator's own writes are no change for a parked handler), records of ends that wrote nothing
gone, an unreadable memory discarded or replaced by a hold, and the records of handlers the
operator no longer has pruned.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping, MutableMapping
from typing import Any

from kopf_outcomes import memory
from kopf_outcomes._kopf.cycle import EMPTY, Cycle, records_as_patched
from kopf_outcomes._kopf.internals import Cause, Handler, HandlerId, changing_ids, raw_body_of, resource_deletion_ids
from kopf_outcomes._kopf.kopf_runs import options_of
from kopf_outcomes._kopf.recall import fresh_key
from kopf_outcomes._kopf.states import before_status, digest, recorded_digest, remembered
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.memory import MemoryRecord


def track(cycle: Cycle, handlers: Collection[Handler]) -> None:
    """The handlers of this cycle that have a memory and did not conclude now (parked ones)."""
    for handler in handlers:
        handler_id = str(handler.id)
        if handler_id in cycle.records and handler_id not in cycle.tracked:
            cycle.own_tracked()[handler_id] = (handler, cycle, False)


def refresh(plugins: PluginManager, cycle: Cycle, cause: Cause) -> None:
    """
    At the end of a cycle that writes to the object: every remembered digest is of the object as
    the cycle's patch leaves it. Of the handlers that concluded now (later handlers and observers
    of the cycle may have written more), and of those whose state had not changed before this
    cycle: what the operator writes, in any handler's cycle, is never a change for a parked one.
    Each digest is taken in the cycle of its handler (a sub-handler's results are its own). An end
    whose cycle wrote nothing into its state goes (:data:`ENDS`).
    """
    body, patch = raw_body_of(cause), getattr(cause, "patch", None)
    if body is None or not patch:
        return
    records = records_as_patched(cycle, patch)
    for handler_id, (handler, own, concluded) in cycle.tracked.items():
        record = records.get(handler_id)
        if record is None or (not concluded and not memory.about(record, digest(plugins, own, handler, cause))):
            continue  # gone, or its state changed before this cycle: it wakes as it should
        state_digest = remembered(plugins, own, handler, cause)
        if concluded and unwritten_end(plugins, own, handler, cause, record, state_digest):
            forget(cycle, body, patch, handler_id, cause)
        elif record["digest"] != state_digest:  # about the state the cycle leaves: it stays as it is
            rewrite(cycle, body, patch, cause, handler_id, record, state_digest,
                    before_status(plugins, own, handler, cause, state_digest))
    refresh_unrun_children(plugins, cycle, cause, records)


def refresh_unrun_children(plugins: PluginManager, cycle: Cycle, cause: Cause,
                           records: Mapping[str, MemoryRecord]) -> None:
    """The records of sub-handlers (of any depth) of this cycle's handlers that no run of the cycle
    tracked: their parent was not run (Kopf waits for a child's retry), so they are not at hand. The
    cycle's writes are no change for them either: each record about the state before the cycle is
    made about the state the cycle leaves, in the scope it stores (its handler's, as it concluded)."""
    body, patch = raw_body_of(cause), getattr(cause, "patch", None)
    parents = tuple(f"{handler.id}/" for handler in cycle.handlers)
    if body is None or not patch or not parents:
        return
    for handler_id, record in records.items():
        if handler_id in cycle.tracked or not handler_id.startswith(parents):
            continue
        before = recorded_digest(plugins, cycle, cause, record)
        if before is None or not memory.about(record, before):
            continue  # its scope is unknown, or its state changed before this cycle: it wakes as it should
        after = recorded_digest(plugins, cycle, cause, record, patched=True)
        if after is not None and after != record["digest"]:
            unsent = recorded_digest(plugins, cycle, cause, record, patched=True, status=False) \
                if "status" in patch else None
            rewrite(cycle, body, patch, cause, handler_id, record, after, unsent if unsent != after else None)


def rewrite(cycle: Cycle, body: Mapping[str, Any], patch: MutableMapping[str, Any], cause: Cause, handler_id: str,
            record: MemoryRecord, state_digest: str, unsent: str | None) -> None:
    """The record made about the state the cycle's patch leaves (``state_digest``), and that state
    without its write into ``status`` (``unsent``: None where it is the same)."""
    new = memory.MemoryRecord(**{**record, "digest": state_digest})
    new.pop("before_status", None)
    if unsent is not None:
        new["before_status"] = unsent
    memory.write(body, patch, handler_id, new, cause.logger, cycle.keys, known=cycle.records)


# The conclusions that end a handler's work on its state: a Success, and a Fatal that lets its finalizer
# go (the rules', or a person's release of a retention). Their record is no retention and holds nothing
# (``held.WAITING``). Not remembered, an end that kept its key (``concluding.keeps_key``) keeps its record
# only where its cycle writes into its state: a kill after that write and before the finalizer's removal
# runs it again on that state, which its record says it acted on. Else the record ends (``refresh``).
ENDS = frozenset({"success", "fatal"})


def unwritten_end(plugins: PluginManager, cycle: Cycle, handler: Handler, cause: Cause, record: MemoryRecord,
                  state_digest: str | None = None) -> bool:
    """Whether the record is one that ends the handler's work (:data:`ENDS`, not remembered) whose cycle
    wrote nothing into its state (``state_digest``: the state as the cycle's patch leaves it, if known):
    it goes."""
    if record["outcome"] not in ENDS or options_of(plugins, handler, cause).remember:
        return False
    patched = state_digest if state_digest is not None else digest(plugins, cycle, handler, cause, patched=True)
    if patched != digest(plugins, cycle, handler, cause):
        return False
    # Its key made from an earlier state (before a Pending's own write): a run after a kill, with no
    # record, would get another. It goes only where the state as it is would give the same key.
    key = record.get("key")
    return key is None or key == fresh_key(cycle, handler, cause, patched)


def forget(cycle: Cycle, body: Mapping[str, Any], patch: MutableMapping[str, Any], handler_id: str,
           cause: Cause) -> None:
    """The handler's record goes from the patch; where the memory is then as the object shows it,
    the patch writes no memory at all, as it would not have without the record (on a stale view, a
    write of it would remove records that the view does not show: a retention among them)."""
    memory.write(body, patch, handler_id, None, cause.logger, cycle.keys, known=cycle.records)
    metadata: dict[str, Any] = patch.get("metadata") or {}
    annotations: dict[str, Any] = metadata.get("annotations") or {}
    shown = ((body.get("metadata") or EMPTY).get("annotations") or EMPTY).get(cycle.keys.memory)
    if cycle.keys.memory in annotations and annotations[cycle.keys.memory] == shown:
        del annotations[cycle.keys.memory]
        if not annotations:
            del metadata["annotations"]
            if not metadata:
                del patch["metadata"]


def discard_unreadable(cycle: Cycle, cause: Cause) -> None:
    """
    A memory none of which is the object's (unreadable, or written for another uid), in a cycle
    whose handlers ran: each handler of the cycle it could be about concludes afresh (a parked one
    is woken to), so it goes in this PATCH unless the cycle wrote the memory anew; left, it would
    hold the finalizer once the handlers are done (an unreadable memory holds: :mod:`.held`). A
    deletion handler that no longer matches the object (relabelled out of its ``labels=``) never
    runs to conclude afresh: where Kopf's progress says it began and did not finish, it may wait,
    so the memory written instead says it is pending (it holds the finalizer, and names it); where
    that cannot be told, the memory stays as it is, neither removed nor replaced.
    """
    body, patch = raw_body_of(cause), getattr(cause, "patch", None)
    if body is None or patch is None:
        return
    written = (patch.get("metadata") or EMPTY).get("annotations") or EMPTY
    unmatched = _unfinished_unmatched(cycle, cause)
    if unmatched is None:
        if cycle.keys.memory in written:
            del patch["metadata"]["annotations"][cycle.keys.memory]
        return
    uid = str((body.get("metadata") or EMPTY).get("uid") or "")
    for handler_id in unmatched:
        unknown = memory.record(None, digest="", outcome="pending", reason="its memory was unreadable", parked=True,
                                depends_on=None, uid=uid)
        memory.write(body, patch, handler_id, unknown, cause.logger, cycle.keys, known=EMPTY)
    written = (patch.get("metadata") or EMPTY).get("annotations") or EMPTY
    if cycle.keys.memory not in written:
        patch.setdefault("metadata", {}).setdefault("annotations", {})[cycle.keys.memory] = None


def _unfinished_unmatched(cycle: Cycle, cause: Cause) -> list[str] | None:
    """The deletion handlers of the resource that do not match the object now and have begun and
    not finished in Kopf's progress (a Pending one of ours is such); None: unknown."""
    resource, kopf_body = getattr(cause, "resource", None), getattr(cause, "body", None)
    if cycle.registry is None or resource is None or kopf_body is None:
        return None
    matching = {str(handler.id) for handler in cycle.handlers}
    storage = cycle.settings.persistence.progress_storage
    found = []
    for handler_id in sorted(resource_deletion_ids(cycle.registry, resource) - matching):
        try:
            progress = storage.fetch(key=HandlerId(handler_id), body=kopf_body)
        except Exception:  # noqa: BLE001 - a storage of the user's: unknown
            return None
        if progress is not None and not (progress.get("success") or progress.get("failure")):
            found.append(handler_id)
    return found


def prune(cycle: Cycle, cause: Cause) -> None:
    """
    Where this cycle writes the memory anyway: the records of handlers the operator no longer has
    (renamed, removed from the code) go. Kopf runs no handler it does not have, so nothing could
    conclude them, and a retained one holds no finalizer (Kopf releases it when the handlers it has
    are done). Sub-handlers (``parent/child``) stay with their parent; ``remember=True`` records of
    handlers the operator has stay, as they must.
    """
    body, patch = raw_body_of(cause), getattr(cause, "patch", None)
    if cycle.registry is None or body is None or not patch:
        return
    pending = (patch.get("metadata") or {}).get("annotations", {}).get(cycle.keys.memory)
    if not pending:
        return
    known = changing_ids(cycle.registry) | {str(handler.id) for handler in cycle.handlers}
    for handler_id in memory.parse(pending):
        if handler_id not in known and not any(handler_id.startswith(f"{parent}/") for parent in known):
            memory.write(body, patch, handler_id, None, cause.logger, cycle.keys, known=cycle.records)
