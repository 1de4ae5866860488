"""The read-only :class:`~kopf_outcomes.HandlerRun` that hooks see, built from Kopf's objects."""
from __future__ import annotations

import contextvars
import datetime
import enum
from collections.abc import Mapping
from typing import Any

from kopf_outcomes import engine
from kopf_outcomes._kopf.internals import Cause, ErrorsMode, Handler, OperatorSettings, default_backoff
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.memory import MemoryRecord
from kopf_outcomes.options import NO_OPTIONS, HandlerOptions
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
        own = own_options(handler.fn)
        return own if own is not None else NO_OPTIONS
    return engine.options(plugins, handler.fn, str(handler.id), resource_of(cause), cause.logger)


def body_of(cause: Cause) -> Mapping[str, Any] | None:
    body: Mapping[str, Any] | None = getattr(cause, "body", None)
    return body


def build(plugins: PluginManager, handler: Handler, cause: Cause, retry: int, runtime: datetime.timedelta,
          settings: OperatorSettings, previous: MemoryRecord | None) -> HandlerRun:
    body = body_of(cause)
    reason = getattr(cause, "reason", None)
    errors = handler.errors if handler.errors is not None else default_errors.get(ErrorsMode.TEMPORARY)
    backoff = handler.backoff if handler.backoff is not None else default_backoff(settings)
    return HandlerRun(
        handler_id=str(handler.id),
        reason=str(reason.value) if isinstance(reason, enum.Enum) else None,
        resource=resource_of(cause),
        body=body,
        retry=retry,
        runtime=runtime.total_seconds(),
        deleting=bool(body is not None and (body.get("metadata") or {}).get("deletionTimestamp")),
        options=options_of(plugins, handler, cause),
        logger=cause.logger,
        previous=previous,
        errors_mode=errors.name,
        backoff=float(backoff),
    )
