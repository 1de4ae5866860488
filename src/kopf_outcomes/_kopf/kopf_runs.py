"""
The read-only :class:`~kopf_outcomes.HandlerRun` that hooks see, read from Kopf's objects.

A run is built on every observed run, so this module is written for that count: its sources are
a plain tuple read by position (a named tuple's constructor is a Python call), set through the
slot's descriptor (the run is frozen to everyone else), the options read only where anything can
set one, and the Enum members' names, values and ``ErrorsMode.TEMPORARY`` looked up once (their
properties and class attributes are Python calls). Together these buy 2.2 % of a run with five
trivial observers (the instruction scenario, 2026-12-06: 363,900 instructions without them, 356,600
with them; stock Kopf's run: 333,100): each alone is under 1 %, together they keep five observers
within their hold line (benchmarks README), so they stay together.
"""
from __future__ import annotations

import contextvars
import dataclasses
import enum
import logging
from collections.abc import Collection, Mapping
from typing import Any, Final, Protocol

from kopf_outcomes import engine
from kopf_outcomes._kopf.internals import (
    Cause,
    ErrorsMode,
    Handler,
    HandlerState,
    OperatorSettings,
    State,
    default_backoff,
    progress_of,
    raw_body_of,
    runtime_of,
)
from kopf_outcomes.kinds import Kind
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.memory import MemoryRecord
from kopf_outcomes.options import NO_OPTIONS, HandlerOptions, declared
from kopf_outcomes.options import attached_options as own_options
from kopf_outcomes.runs import HandlerRun, ResourceRef


class Siblings(Protocol):
    """What a run reads of its cycle (a :class:`~kopf_outcomes._kopf.cycle.Cycle`): the cause's
    handlers and Kopf's progress of them, for :attr:`KopfRun.siblings`."""

    @property
    def handlers(self) -> Collection[Handler]: ...

    @property
    def state(self) -> State | None: ...

# Per handler run: how the caller treats arbitrary exceptions (only plugins need it).
default_errors: contextvars.ContextVar[ErrorsMode] = contextvars.ContextVar("kopf_outcomes_errors")

_resource_refs: dict[int, tuple[object, ResourceRef]] = {}  # Kopf's resource objects live long
_MAX_RESOURCE_REFS = 1024  # an operator serves few resource kinds; a forgotten one is made again


def resource_of(cause: Cause) -> ResourceRef | None:
    resource = getattr(cause, "resource", None)
    return None if resource is None else resource_ref(resource)


def resource_ref(resource: Any) -> ResourceRef:
    """Kopf's resource as hooks see it (one per Kopf resource object, kept)."""
    try:
        known, ref = _resource_refs[id(resource)]
        if known is resource:
            return ref
    except KeyError:
        pass
    ref = ResourceRef(resource.group, resource.version, resource.plural, resource.kind)
    if len(_resource_refs) >= _MAX_RESOURCE_REFS:
        _resource_refs.clear()
    _resource_refs[id(resource)] = (resource, ref)  # the object is kept, so its id is not reused
    return ref


def options_of(plugins: PluginManager, handler: Handler, cause: Cause) -> HandlerOptions:
    """The handler's options: its own, merged with a policy's and plugins' where there are any."""
    if not plugins.provides_options:  # the hot path: no policy, no options plugin
        return own_options(handler.fn) or NO_OPTIONS
    return engine.options(plugins, handler.fn, str(handler.id), resource_of(cause), cause.logger)


def option(plugins: PluginManager, handler: Handler, cause: Cause, name: str) -> Any:
    """One option of a handler; None at no cost where no policy, plugin or handler sets it."""
    if not plugins.provides_options and name not in declared:
        return None
    return getattr(options_of(plugins, handler, cause), name)


def body_of(cause: Cause) -> Mapping[str, Any] | None:
    body: Mapping[str, Any] | None = getattr(cause, "body", None)
    return body


_TEMPORARY = ErrorsMode.TEMPORARY
_names: dict[int, str] = {id(mode): mode.name for mode in ErrorsMode}
_values: dict[int, str | None] = {}  # by the member's id (an Enum's hash is computed in Python)


def _reason_value(reason: object) -> str | None:
    value = str(reason.value) if isinstance(reason, enum.Enum) else None
    if value is not None:
        _values[id(reason)] = value  # members live as long as their class: the id is theirs
    return value


# What a :class:`KopfRun` reads its fields from, by position; read now what would change later:
# ``runtime`` is a handler's progress (its runtime read when a hook asks), ``errors`` the caller's
# as it is during the run, ``options`` read now (a failing options plugin is logged once per run).
_Sources = tuple[Handler, Cause, int, "float | HandlerState", OperatorSettings, "MemoryRecord | None", ErrorsMode,
                 HandlerOptions, Kind, "Siblings | None"]
_HANDLER: Final = 0
_CAUSE: Final = 1
_RETRY: Final = 2
_RUNTIME: Final = 3
_SETTINGS: Final = 4
_PREVIOUS: Final = 5
_ERRORS: Final = 6
_OPTIONS: Final = 7
_KIND: Final = 8
_CYCLE: Final = 9  # the cycle the run is in (its handlers and Kopf's state): read for ``siblings``


class KopfRun(HandlerRun):
    """A :class:`HandlerRun` that reads each field from Kopf's objects when a hook asks for it: built
    whole, it cost five trivial observers a fifth of Kopf's run, and most read few fields."""

    __slots__ = ("_sources", "_runtime")
    _sources: _Sources
    _runtime: float

    def __new__(cls, *args: Any, **fields: Any) -> HandlerRun:  # type: ignore[misc]
        """Only ``build()`` makes these: ``dataclasses.replace()`` gets a plain HandlerRun."""
        return HandlerRun(*args, **fields)

    def __reduce__(self) -> tuple[Any, ...]:  # a copy or a pickle is a plain HandlerRun too
        return HandlerRun, tuple(self._asdict().values())

    def __setattr__(self, name: str, value: object) -> None:  # read-only to hooks, as a plain run is
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    @property
    def handler_id(self) -> str:
        return str(self._sources[_HANDLER].id)

    @property
    def reason(self) -> str | None:
        reason = getattr(self._sources[_CAUSE], "reason", None)
        return _values.get(id(reason)) or _reason_value(reason)

    @property
    def resource(self) -> ResourceRef | None:
        return resource_of(self._sources[_CAUSE])

    @property
    def body(self) -> Mapping[str, Any] | None:
        return body_of(self._sources[_CAUSE])

    @property
    def retry(self) -> int:
        return self._sources[_RETRY]

    @property
    def runtime(self) -> float:
        """Read once, at the first hook that asks (Kopf's runtime moves on while hooks run)."""
        try:
            return self._runtime
        except AttributeError:
            source = self._sources[_RUNTIME]
            runtime = source if isinstance(source, float) else runtime_of(source)
            _set_runtime(self, runtime)
            return runtime

    @property
    def deleting(self) -> bool:
        body = raw_body_of(self._sources[_CAUSE])
        metadata = body.get("metadata") if body is not None else None
        return bool(metadata and metadata.get("deletionTimestamp"))

    @property
    def options(self) -> HandlerOptions:
        return self._sources[_OPTIONS]

    @property
    def logger(self) -> logging.Logger | logging.LoggerAdapter[Any]:
        return self._sources[_CAUSE].logger

    @property
    def previous(self) -> MemoryRecord | None:
        return self._sources[_PREVIOUS]

    @property
    def errors_mode(self) -> str:
        errors = self._sources[_ERRORS]
        return _names.get(id(errors)) or errors.name

    @property
    def kind(self) -> str:
        return self._sources[_KIND].value

    @property
    def finalizer(self) -> str | None:
        return self._sources[_SETTINGS].persistence.finalizer

    @property
    def siblings(self) -> Mapping[str, bool] | None:
        """The cause's other handlers, concluded or not, from the cycle the run is in."""
        cycle, handler = self._sources[_CYCLE], self._sources[_HANDLER]
        if cycle is None or cycle.state is None or handler not in cycle.handlers:
            return None  # a run outside of its cycle: not known
        state = cycle.state
        return {str(other.id): progress_of(state, other).finished for other in cycle.handlers
                if other.id != handler.id and other.id in state}

    @property
    def backoff(self) -> float:
        handler = self._sources[_HANDLER]
        return float(handler.backoff if handler.backoff is not None else default_backoff(self._sources[_SETTINGS]))


_new = object.__new__
_set_sources = KopfRun._sources.__set__  # type: ignore[attr-defined]  # the run is frozen to everyone else
_set_runtime = KopfRun._runtime.__set__  # type: ignore[attr-defined]


def build(plugins: PluginManager, kind: Kind, handler: Handler, cause: Cause, retry: int,
          runtime: float | HandlerState, settings: OperatorSettings, previous: MemoryRecord | None,
          cycle: Siblings | None = None) -> HandlerRun:
    """The run as hooks see it: only what would change later is read now (``runtime``, a handler's
    progress, is read when a hook asks)."""
    run = _new(KopfRun)
    _set_sources(run, (
        handler, cause, retry, runtime, settings, previous,
        # The caller's errors mode is set only where plugins decide (handler_run): else it is Kopf's default.
        handler.errors if handler.errors is not None else _TEMPORARY if plugins.decides_builtin
        else default_errors.get(_TEMPORARY),
        options_of(plugins, handler, cause) if plugins.provides_options or declared else NO_OPTIONS,
        kind,
        cycle,
    ))
    return run
