"""
The state a handler depends on, in a cycle: what its memory compares (``digest``), what it
remembers (``remembered``: the object as the cycle's patch leaves it), and what changed since
its previous conclusion (``woken_by``: see :mod:`kopf_outcomes.wakeups`).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple, Protocol

from kopf_outcomes import engine, wakeups
from kopf_outcomes._kopf.internals import Cause, Handler, OperatorWrites, raw_body_of
from kopf_outcomes._kopf.kopf_runs import options_of
from kopf_outcomes.digest import hashed, state
from kopf_outcomes.digest import patched as patched_body
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.memory import MemoryRecord, about


class OperatorsOwn(Protocol):
    """What a state leaves out as the operator's own writes: the results Kopf stores for its
    handlers and its storages' fields (a :class:`~kopf_outcomes._kopf.cycle.Cycle` knows both)."""

    @property
    def handler_ids(self) -> AbstractSet[str]: ...

    @property
    def writes(self) -> OperatorWrites: ...


class Scope(NamedTuple):
    """What a handler's state is made of, as a record stores it: its ``depends_on`` (None: the
    default scope) and its ``ignore``."""

    depends_on: list[str] | None
    ignore: list[str]


def digest(plugins: PluginManager, cycle: OperatorsOwn, handler: Handler, cause: Cause, *, patched: bool = False,
           scope: Scope | None = None) -> str:
    """The digest of the state the handler depends on; ``patched``: of the object as this cycle's
    pending patch will leave it (what is remembered), else as it is now (what is compared);
    ``scope``: in that scope instead of the options' (a record's, written before an upgrade)."""
    body = raw_body_of(cause)
    return hashed(state_of(plugins, cycle, handler, cause, patched=patched, scope=scope)) if body is not None else ""


def scope_of(plugins: PluginManager, handler: Handler, cause: Cause) -> Scope:
    """The handler's scope now, as a record stores it."""
    options = options_of(plugins, handler, cause)
    return Scope(list(options.depends_on) if options.depends_on is not None else None, list(options.ignore or ()))


def state_of(plugins: PluginManager, cycle: OperatorsOwn, handler: Handler, cause: Cause, *,
             patched: bool = False, scope: Scope | None = None, status: bool = True) -> dict[str, Any]:
    """The state the handler depends on (see :func:`digest`); ``status=False``: the patch's part in
    ``status`` left unapplied (see :func:`before_status`)."""
    if raw_body_of(cause) is None:
        return {}
    chosen = options_of(plugins, handler, cause) if scope is None else scope  # both name depends_on and ignore
    return state_in(plugins, cycle, cause, chosen.depends_on, chosen.ignore or (), patched=patched, status=status)


def state_in(plugins: PluginManager, cycle: OperatorsOwn, cause: Cause, depends_on: Iterable[str] | None,
             ignore: Iterable[str], *, patched: bool = False, status: bool = True) -> dict[str, Any]:
    """The state in a scope, whoever's it is: a record's own, where its handler is not at hand."""
    body = raw_body_of(cause)
    if body is None:
        return {}
    patch = getattr(cause, "patch", None) if patched else None
    if patch and not status:
        patch = {key: value for key, value in patch.items() if key != "status"}
    if patch:
        body = patched_body(body, patch)
    owned = engine.owned_fields(plugins, cause.logger)
    return state(body, depends_on=depends_on, excluded=[*_results(body, cycle.handler_ids), *cycle.writes.fields,
                                                        *owned],
                 excluded_prefixes=cycle.writes.prefixes, ignore=ignore)


def recorded_digest(plugins: PluginManager, cycle: OperatorsOwn, cause: Cause, record: MemoryRecord, *,
                    patched: bool = False, status: bool = True) -> str | None:
    """The digest of the state in the scope a record was concluded in (it stores it, since it stores
    its ``key``); None for a record from before, whose scope is unknown without its handler."""
    if "key" not in record or raw_body_of(cause) is None:
        return None
    return hashed(state_in(plugins, cycle, cause, record.get("depends_on"), record.get("ignore", []), patched=patched,
                           status=status))


def _results(body: Mapping[str, Any], handler_ids: AbstractSet[str]) -> list[tuple[str, ...]]:
    """Where Kopf stores the results of the operator's handlers: ``status.<id>``, and for a
    sub-handler ``status.<id>/<sub id>`` (Kopf names a sub-handler after its parent)."""
    found: list[tuple[str, ...]] = [("status", handler_id) for handler_id in handler_ids]
    status = body.get("status")
    if isinstance(status, Mapping):
        found.extend(("status", key) for key in status
                     if isinstance(key, str) and "/" in key and key.split("/", 1)[0] in handler_ids)
    return found


def remembered(plugins: PluginManager, cycle: OperatorsOwn, handler: Handler, cause: Cause) -> str:
    """The digest of the state a conclusion is about (the object as the cycle's patch leaves it),
    its parts kept to tell what wakes the handler next."""
    chosen = state_of(plugins, cycle, handler, cause, patched=True)
    found = hashed(chosen)
    wakeups.remember(found, chosen)
    return found


def before_status(plugins: PluginManager, cycle: OperatorsOwn, handler: Handler, cause: Cause,
                  patched: str) -> str | None:
    """
    The digest of the state as the cycle's patch leaves it without its part in ``status``, where
    that differs from the state it leaves whole (``patched``, its digest; else None): what the
    object shows with the memory landed and the status write not. Kopf PATCHes the object (the
    memory with it) before its ``/status`` where the status is a subresource, and a kill between
    the two leaves this state; the API server prunes a status field its schema lacks, subresource
    or not. Either way it is the state the handler saw plus some of the operator's own writes of
    the cycle: a state it acted on.
    """
    patch = getattr(cause, "patch", None)
    if raw_body_of(cause) is None or not patch or "status" not in patch:
        return None
    found = hashed(state_of(plugins, cycle, handler, cause, patched=True, status=False))
    return None if found == patched else found


def woken_by(plugins: PluginManager, cycle: OperatorsOwn, handler: Handler, cause: Cause,
             previous: MemoryRecord | None) -> list[str] | None:
    """The paths of the handler's state that changed since its previous conclusion, if known."""
    if previous is None:
        return None
    now = state_of(plugins, cycle, handler, cause)
    return wakeups.changed(previous["digest"], now) if not about(previous, hashed(now)) else None
