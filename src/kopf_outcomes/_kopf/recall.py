"""
What ``recall()`` answers inside a handler: its record, whether that was about the state it
sees now, and the idempotency key, which a record keeps while the state is the one it acted on.
"""
from __future__ import annotations

import dataclasses

from kopf_outcomes import memory
from kopf_outcomes._kopf import dependents
from kopf_outcomes._kopf.cycle import EMPTY, Cycle, of
from kopf_outcomes._kopf.internals import Cause, Handler, cause_var, handler_var, subsettings_var
from kopf_outcomes._kopf.kopf_runs import body_of
from kopf_outcomes._kopf.states import Scope, digest, scope_of
from kopf_outcomes.errors import NotInstalledError
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.memory import Memory


def current_memory(plugins: PluginManager | None) -> Memory:
    """For :func:`kopf_outcomes.recall`: the running handler's memory, as Kopf set the context."""
    try:
        handler, cause = handler_var.get(), cause_var.get()
    except LookupError:
        raise NotInstalledError("kopf_outcomes.recall() works only inside a handler") from None
    if body_of(cause) is None or plugins is None:
        raise NotInstalledError("kopf_outcomes.recall() works only inside a handler of an object, "
                                "with kopf_outcomes.install() done")
    cycle = of(subsettings_var.get(), cause, handler)
    cycle.own_recalled().add(str(handler.id))  # its key is given out: a failure keeps it (concluding.remember)
    return memory_of(plugins, cycle, handler, cause)


def memory_of(plugins: PluginManager, cycle: Cycle, handler: Handler, cause: Cause) -> Memory:
    """
    The handler's memory in this run: its record, whether that was about the state it sees now, and
    the idempotency key. The key is the one the record carries while the state is the one it acted
    on (so the handler's own writes, Kopf's and an upgrade's change of its scope keep it), else
    made from the state as the run sees it (before this cycle's patch): ``recall()`` and the record
    the run then writes agree.
    """
    handler_id = str(handler.id)
    state_digest = digest(plugins, cycle, handler, cause)
    previous = cycle.records.get(handler_id)
    rescoped = None
    if previous is not None:
        # The scope it was concluded in. Records carry ``ignore`` (absent: none) since they carry their ``key``:
        # one without was written before, its ``ignore`` read as the handler's own now (unknown: nothing tells it).
        now = scope_of(plugins, handler, cause)
        scope = Scope(previous.get("depends_on"), previous.get("ignore", []) if "key" in previous else now.ignore)
        if scope != now:  # an upgrade changed it
            rescoped = digest(plugins, cycle, handler, cause, scope=scope)
    taken = cycle.objects.get(handler_id)
    key = fresh_key(cycle, handler, cause, state_digest)
    if taken is None:
        found = Memory(previous=previous, digest=state_digest, idempotency_key=key,
                       objects=dependents.unknown_objects(cycle.kind, handler), previous_scope_digest=rescoped)
    else:
        refs, fingerprint = taken
        found = Memory(previous=previous, digest=state_digest, idempotency_key=key,
                       objects=refs, objects_digest=fingerprint,
                       previous_objects_digest=dependents.previous(cause, handler_id, previous),
                       previous_scope_digest=rescoped)
    # The stored key vouches only for the state the record was written about: its own objects too.
    kept = previous.get("key") if previous is not None and previous.get("objects") == found.objects_digest else None
    return dataclasses.replace(found, idempotency_key=kept) if kept and found.about_this_state else found


def fresh_key(cycle: Cycle, handler: Handler, cause: Cause, state_digest: str) -> str:
    """The idempotency key of a state with no record to carry one: its object, handler and state,
    the handler's other objects included."""
    uid = str(((body_of(cause) or EMPTY).get("metadata") or EMPTY).get("uid", ""))
    taken = cycle.objects.get(str(handler.id))
    return memory.idempotency_key(uid, str(handler.id), state_digest + (taken[1] if taken is not None else ""))
