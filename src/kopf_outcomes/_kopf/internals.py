"""
Kopf's private modules and types, imported here and nowhere else.

Kopf's layout used here is stable since 1.35; the supported range is checked at install time
so that an operator on an untested Kopf fails loudly at start instead of misbehaving later.

A run's runtime is computed in floats (:func:`runtime_of`), not by Kopf's datetime arithmetic,
which costs about a microsecond on every observed run.
"""
from __future__ import annotations

import asyncio
import contextvars
import copy
import dataclasses
import datetime
import functools
import logging
import os
import weakref
from collections.abc import Collection, Mapping
from importlib import metadata
from typing import Any, NamedTuple

from kopf._cogs.aiokits import aiotoggles
from kopf._cogs.clients import api as kopf_api
from kopf._cogs.clients import errors as kopf_api_errors
from kopf._cogs.clients import watching
from kopf._cogs.configs.configuration import OperatorSettings
from kopf._cogs.structs import finalizers, patches
from kopf._cogs.structs.ids import HandlerId
from kopf._core.actions import application, execution
from kopf._core.actions.execution import (
    Cause,
    ErrorsMode,
    ExtraContext,
    Handler,
    HandlerChildrenRetry,
    LifeCycleFn,
    State,
    cause_var,
    handler_var,
    no_extra_context,
    subsettings_var,
)
from kopf._core.actions.execution import Outcome as KopfOutcome
from kopf._core.actions.execution import Result as KopfResult
from kopf._core.actions.progression import HandlerState
from kopf._core.engines import indexing
from kopf._core.intents import causes
from kopf._core.intents.handlers import TimerHandler
from kopf._core.reactor import observation, queueing

from kopf_outcomes import misuse
from kopf_outcomes.errors import UnsupportedKopfError
from kopf_outcomes.kinds import Kind

misuse.probe(lambda: handler_var.get(None) is not None)
APIForbiddenError = kopf_api_errors.APIForbiddenError

__all__ = [
    "APIForbiddenError", "CHANGE", "Cause", "ErrorsMode", "ExtraContext", "Handler", "HandlerChildrenRetry",
    "HandlerId", "HandlerState", "KopfOutcome", "KopfResult", "LifeCycleFn", "OperatorSettings", "SUBHANDLER",
    "SUPPORTED", "State", "afresh", "aiotoggles", "application", "cause_var", "changes_only", "changing_ids",
    "check_version", "default_backoff", "deletion_ids", "execution", "filters_by_label", "finalizers",
    "handler_var", "index_ids", "indexing", "kind_of", "kopf_api", "kopf_api_errors", "no_extra_context",
    "observation", "operator_registry", "operator_resource", "operator_writes", "patches", "processor_keywords",
    "progress_of", "progresses", "queueing", "raw_body_of", "registered_ids", "resource_changing_ids",
    "resource_deletion_ids", "runtime_of", "subsettings_var", "unheld", "watching", "with_outcomes",
]

# The oldest and the newest minor versions of Kopf that the patch was tested with.
SUPPORTED = ((1, 37), (1, 45))
ALLOW_UNTESTED_ENV = "KOPF_OUTCOMES_ALLOW_UNTESTED_KOPF"


def check_version() -> str:
    """Kopf's version if supported; else UnsupportedKopfError, or a warning if the user opted in."""
    version = metadata.version("kopf")
    try:
        major_minor = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        major_minor = None
    oldest, newest = SUPPORTED
    if major_minor is not None and oldest <= major_minor <= newest:
        return version
    problem = (f"kopf-outcomes cannot read the Kopf version {version!r}" if major_minor is None else
               f"kopf-outcomes supports Kopf {oldest[0]}.{oldest[1]} to {newest[0]}.{newest[1]}.x, "
               f"but Kopf {version} is installed")
    if os.environ.get(ALLOW_UNTESTED_ENV) == "1":
        logging.getLogger("kopf_outcomes").warning(f"{problem}; patching it anyway, as {ALLOW_UNTESTED_ENV}=1 asks.")
        return version
    raise UnsupportedKopfError(f"{problem}; pin kopf to a supported version, upgrade kopf-outcomes, "
                               f"or set {ALLOW_UNTESTED_ENV}=1 to try it at your own risk.")


# Kopf's cause types, most specific first (a WebhookCause is a ResourceCause, and so on).
_KINDS: tuple[tuple[type[Any], Kind], ...] = (
    (causes.ChangingCause, Kind.CHANGE),
    (causes.WebhookCause, Kind.WEBHOOK),
    (causes.WatchingCause, Kind.EVENT),
    (causes.IndexingCause, Kind.INDEX),
    (causes.ActivityCause, Kind.ACTIVITY),
)
CHANGE, SUBHANDLER = Kind.CHANGE, Kind.SUBHANDLER
_KIND_OF_TYPE: dict[type[Any], Kind] = {}  # by the cause's exact type, once found


def kind_of(cause: Cause, handlers: Collection[Handler]) -> Kind:
    """
    The kind of the handlers Kopf is about to run for this cause: decided here, once per
    cycle, from Kopf's own types. Change handlers run while another handler runs (Kopf's
    ``handler_var`` is set) are sub-handlers; daemons and timers share Kopf's ``DaemonCause``
    and are told apart by their handlers. An unknown cause is read as a change: the strictest
    kind, which never releases more than stock Kopf does.
    """
    kind = _KIND_OF_TYPE.get(cause.__class__)
    if kind is None:
        if isinstance(cause, causes.DaemonCause):
            first = next(iter(handlers), None)
            return Kind.TIMER if isinstance(first, TimerHandler) else Kind.DAEMON
        kind = next((kind for cause_type, kind in _KINDS if isinstance(cause, cause_type)), CHANGE)
        _KIND_OF_TYPE[cause.__class__] = kind
    if kind is CHANGE and handler_var.get(None) is not None:
        return SUBHANDLER
    if kind is Kind.ACTIVITY and getattr(cause, "activity", None) is causes.Activity.AUTHENTICATION:
        return Kind.LOGIN
    return kind


class OperatorWrites(NamedTuple):
    """What the operator's own Kopf storages write into objects: annotation prefixes and fields."""

    prefixes: tuple[str, ...]
    fields: tuple[tuple[str, ...], ...]


_writes: weakref.WeakKeyDictionary[Any, tuple[object, OperatorWrites]] = weakref.WeakKeyDictionary()


def operator_writes(settings: OperatorSettings) -> OperatorWrites:
    """The annotations and fields that Kopf's progress and diff-base storages of this operator
    write, by the storages' own knowledge (their ``prefix``, ``field`` and ``touch_field``, of
    each storage in a multi-storage), whatever prefix or field the operator configured."""
    progress, diffbase = settings.persistence.progress_storage, settings.persistence.diffbase_storage
    known = _writes.get(progress)
    if known is not None and known[0] is diffbase:
        return known[1]
    prefixes: list[str] = []
    fields: list[tuple[str, ...]] = []
    pending: list[Any] = [progress, diffbase]
    while pending:
        storage = pending.pop()
        pending.extend(getattr(storage, "storages", ()))
        prefix = getattr(storage, "prefix", None)
        if isinstance(prefix, str) and prefix:
            prefixes.append(prefix)
        for name in ("field", "touch_field"):
            field = getattr(storage, name, None)
            if isinstance(field, tuple) and field and all(isinstance(part, str) for part in field):
                fields.append(field)
    found = OperatorWrites(tuple(sorted(set(prefixes))), tuple(sorted(set(fields))))
    _writes[progress] = (diffbase, found)
    return found


# The operator's registry and the resource of the object's worker (Kopf passes both to the processor).
operator_registry: contextvars.ContextVar[Any] = contextvars.ContextVar("kopf_outcomes_registry", default=None)
operator_resource: contextvars.ContextVar[Any] = contextvars.ContextVar("kopf_outcomes_resource", default=None)
_found_ids: weakref.WeakKeyDictionary[Any, dict[tuple[str, bool], tuple[int, frozenset[str]]]] = (
    weakref.WeakKeyDictionary())


def _ids(registry: Any, part: str, *, finalizing: bool = False) -> frozenset[str]:
    """The ids of the handlers in a part of the operator's registry (with ``finalizing``: those for
    which Kopf keeps its finalizer), of every resource; found again when their number changed."""
    handlers = list(getattr(registry, part).get_all_handlers())
    known = _found_ids.setdefault(registry, {})
    count, found = known.get((part, finalizing), (-1, frozenset()))
    if count != len(handlers):
        found = frozenset(str(handler.id) for handler in handlers if not finalizing or handler.requires_finalizer)
        known[part, finalizing] = (len(handlers), found)
    return found


def registered_ids(registry: Any) -> frozenset[str]:
    """The ids of the operator's timers and daemons: Kopf stores their results at ``status.<id>``
    outside of any change cycle (the change handlers' ids: :func:`changing_ids`)."""
    return _ids(registry, "_spawning")


def changing_ids(registry: Any) -> frozenset[str]:
    """The ids of the operator's change handlers (of every resource): the only ones with a memory."""
    return _ids(registry, "_changing")


def deletion_ids(registry: Any) -> frozenset[str]:
    """The ids of the operator's change handlers for which Kopf keeps its finalizer (deletion
    handlers that are not ``optional=``), of every resource."""
    return _ids(registry, "_changing", finalizing=True)


def index_ids(registry: Any, resource: Any) -> frozenset[str]:
    """The ids of the operator's indexers of this resource (Kopf's own matching of a handler)."""
    return frozenset(str(handler.id) for handler in registry._indexing.get_all_handlers()
                     if handler.selector is None or handler.selector.check(resource))


def filters_by_label(registry: Any, resource: Any, label: str) -> bool | None:
    """Whether some handler of this resource that needs Kopf's finalizer (a change handler, a
    daemon or timer) filters its objects by this label (``labels=``; Kopf's own matching). None
    where it cannot be seen: no handler names the label, but some filters by ``when=`` or by a
    callable of another label, which may select by it."""
    handlers = [handler for handler in (*registry._changing.get_all_handlers(), *registry._spawning.get_all_handlers())
                if handler.selector is not None and handler.selector.check(resource)]
    if any(label in (handler.labels or {}) for handler in handlers):
        return True
    if any(handler.when is not None or any(callable(value) for value in (handler.labels or {}).values())
           for handler in handlers):
        return None
    return False


def resource_changing_ids(registry: Any, resource: Any) -> frozenset[str]:
    """The ids of the operator's change handlers of this resource, whatever their filters."""
    return frozenset(str(handler.id) for handler in registry._changing.get_all_handlers()
                     if handler.selector is None or handler.selector.check(resource))


def resource_deletion_ids(registry: Any, resource: Any) -> frozenset[str]:
    """The ids of the operator's deletion handlers (not ``optional=``) of this resource."""
    return frozenset(str(handler.id) for handler in registry._changing.get_all_handlers()
                     if handler.requires_finalizer and (handler.selector is None or handler.selector.check(resource)))


_changes_only: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def changes_only(registry: Any) -> Any:
    """The registry with its indexers and ``@kopf.on.event`` handlers silenced: for the events we
    queue again, which only the change handlers (and Kopf's daemons, idempotently) may see. They
    stay registered: Kopf's diff-base keeps the fields they ask for (``get_extra_fields``), or a
    repeated event would read as an update that removed them."""
    found = _changes_only.get(registry)
    if found is None:
        found = copy.copy(registry)
        found._indexing = _silenced(registry._indexing)
        found._watching = _silenced(registry._watching)
        _changes_only[registry] = found
    return found


def processor_keywords(processor: Any) -> Mapping[str, Any]:
    """What Kopf binds to the processor it passes its watchers and workers (a ``functools.partial``);
    nothing of a stand-in (Kopf's own tests use mocks)."""
    return processor.keywords if isinstance(processor, functools.partial) else {}


def _silenced(part: Any) -> Any:
    """A registry part that has its handlers (and their extra fields) but offers none to run."""
    silent = copy.copy(part)  # the same list of handlers
    silent.has_handlers = lambda **_: False
    silent.get_handlers = lambda **_: []
    silent.iter_handlers = lambda **_: iter(())
    return silent


def default_backoff(settings: OperatorSettings) -> float:
    """Kopf's backoff for arbitrary exceptions: a setting since 1.38, a constant before."""
    backoff = getattr(settings.execution, "default_backoff", None)
    return float(backoff) if backoff is not None else float(getattr(execution, "DEFAULT_RETRY_DELAY", 60))


def progress_of(state: State, handler: Handler) -> HandlerState:
    """Kopf's progress of one handler: Kopf types the mapping by a protocol, it holds these."""
    progress: HandlerState = state[handler.id]  # type: ignore[assignment]
    return progress


def progresses(state: State) -> list[tuple[HandlerId, HandlerState]]:
    """Every handler's progress in Kopf's own order (the order of ``State.delays``)."""
    return list(state.items())  # type: ignore[arg-type]  # Kopf types the values by a protocol


def with_outcomes(state: State, outcomes: Mapping[HandlerId, KopfOutcome]) -> State:
    """The state as Kopf keeps it after these outcomes (Kopf's own, pure, computation)."""
    final: State = state.with_outcomes(outcomes)  # type: ignore[attr-defined]  # a progression.State
    return final


def afresh(state: State, handler: Handler) -> HandlerState:
    """A finished handler's progress started anew, put in Kopf's state for this cycle (Kopf's
    ``State`` is rebuilt from it after the cycle, and stored): a handler woken again after it
    finished is a new run of it, with its own ``retries=`` and ``timeout=``, not the old run's."""
    old = progress_of(state, handler)
    fresh = dataclasses.replace(_from_scratch(old, purpose=old.purpose), active=old.active, subrefs=old.subrefs,
                                _origin=old._origin)
    state._states[handler.id] = fresh  # type: ignore[attr-defined]  # a progression.State
    return fresh


def unheld(state: State, handler: Handler) -> HandlerState:
    """The progress of a handler whose last run was held (:class:`.marks.Held`), as if the hold had
    not been: Kopf counted it as a retry, one too many, undone here; and the handler's ``timeout=``
    clock starts again now, so that no time held is the handler's. Put in Kopf's state for this
    cycle, as :func:`afresh` does."""
    old = progress_of(state, handler)
    fresh = dataclasses.replace(old, retries=max(0, (old.retries or 0) - 1), started=_from_scratch(old).started)
    state._states[handler.id] = fresh  # type: ignore[attr-defined]  # a progression.State
    return fresh


def _from_scratch(old: HandlerState, **fields: Any) -> HandlerState:
    """A handler's progress started now, by the clock of ``old``: Kopf 1.38+ keeps the loop's time
    against the wall clock (``basetime``), Kopf 1.37 has none."""
    basetime = getattr(old, "basetime", None)
    if basetime is not None:
        fields["basetime"] = basetime
    return HandlerState.from_scratch(**fields)


def raw_body_of(cause: Cause) -> Mapping[str, Any] | None:
    """The object as the plain dict behind Kopf's ``Body`` view, for our own reads (plugins see
    the view), read at this moment (Kopf replaces it when the object changes): every key of the
    view costs a walk through ``dicts.resolve``, of a dict none."""
    body: Mapping[str, Any] | None = getattr(cause, "body", None)
    raw = getattr(body, "_src", None)
    return raw if raw.__class__ is dict else body


def runtime_of(state: HandlerState) -> float:
    """Kopf's ``state.runtime`` in seconds; by the wall clock outside the operator's loop (a hook
    may keep a run and read it later)."""
    try:
        loop_time = asyncio.get_running_loop().time()
    except RuntimeError:
        started = state.started
        now = datetime.datetime.now(datetime.timezone.utc)
        return ((now if started.tzinfo is not None else now.replace(tzinfo=None)) - started).total_seconds()
    try:
        return (state.basetime - state.started).total_seconds() + loop_time
    except (AttributeError, TypeError):
        return state.runtime.total_seconds()
