"""The read-only :class:`~kopf_outcomes.HandlerRun` that hooks see, built from Kopf's objects."""
from __future__ import annotations

import contextvars
import enum
from collections.abc import Mapping
from typing import Any

from kopf_outcomes import engine
from kopf_outcomes._kopf.internals import Cause, ErrorsMode, Handler, OperatorSettings, default_backoff, raw_of
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.memory import MemoryRecord
from kopf_outcomes.options import NO_OPTIONS, HandlerOptions, declared
from kopf_outcomes.options import options_of as own_options
from kopf_outcomes.runs import HandlerRun, ResourceRef

# Per handler run: how the caller treats arbitrary exceptions (only plugins need it).
default_errors: contextvars.ContextVar[ErrorsMode] = contextvars.ContextVar("kopf_outcomes_errors")

_resource_refs: dict[int, tuple[object, ResourceRef]] = {}  # Kopf's resource objects live long


def resource_of(cause: Cause) -> ResourceRef | None:
    resource = getattr(cause, "resource", None)
    if resource is None:
        return None
    try:
        known, ref = _resource_refs[id(resource)]
        if known is resource:
            return ref
    except KeyError:
        pass
    ref = ResourceRef(resource.group, resource.version, resource.plural, resource.kind)
    _resource_refs[id(resource)] = (resource, ref)  # the object is kept, so its id is not reused
    return ref


def options_of(plugins: PluginManager, handler: Handler, cause: Cause) -> HandlerOptions:
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


def raw_body_of(cause: Cause) -> Mapping[str, Any] | None:
    """The object as a plain dict, for our own reads (plugins see Kopf's ``Body`` view)."""
    body: Mapping[str, Any] | None = getattr(cause, "body", None)
    return raw_of(body) if body is not None else None


# Enum members' names and values, looked up once: their properties cost on every run.
_TEMPORARY = ErrorsMode.TEMPORARY  # an Enum class's attribute costs a Python call
_names: dict[int, str] = {id(mode): mode.name for mode in ErrorsMode}
_values: dict[int, str | None] = {}  # by the member's id: an Enum's hash is computed in Python


def _reason_value(reason: object) -> str | None:
    value = str(reason.value) if isinstance(reason, enum.Enum) else None
    if value is not None:
        _values[id(reason)] = value  # members live as long as their class: the id is theirs
    return value


def build(plugins: PluginManager, handler: Handler, cause: Cause, retry: int, runtime: float,
          settings: OperatorSettings, previous: MemoryRecord | None) -> HandlerRun:
    """The run as hooks see it; built on every observed run, so every part of it is cheap."""
    body: Mapping[str, Any] | None = getattr(cause, "body", None)
    metadata = raw_of(body).get("metadata") if body is not None else None
    errors = handler.errors if handler.errors is not None else default_errors.get(_TEMPORARY)
    backoff = handler.backoff if handler.backoff is not None else default_backoff(settings)
    reason = getattr(cause, "reason", None)
    return tuple.__new__(HandlerRun, (  # a named tuple's own __new__ is one Python call more
        str(handler.id),
        _values.get(id(reason)) or _reason_value(reason),
        resource_of(cause),
        body,
        retry,
        runtime,
        bool(metadata and metadata.get("deletionTimestamp")),
        options_of(plugins, handler, cause) if plugins.provides_options or declared else NO_OPTIONS,
        cause.logger,
        previous,
        _names.get(id(errors)) or errors.name,
        float(backoff),
    ))
