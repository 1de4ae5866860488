"""
Real Kopf objects for in-process tests of the patched functions.

The one place in the tests that imports Kopf's private modules: when Kopf moves them,
this file is what needs to follow.
"""

from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

import kopf
from kopf._cogs.aiokits import aiotoggles
from kopf._cogs.clients import api
from kopf._cogs.clients import errors as api_errors
from kopf._cogs.configs import configuration
from kopf._cogs.structs import bodies, ephemera, patches, references
from kopf._core.actions import application, execution, lifecycles, progression
from kopf._core.engines import activities, admission, daemons, indexing
from kopf._core.intents import causes, registries, stoppers
from kopf._core.reactor import inventory, observation, processing, queueing

__all__ = [
    "NO_THROTTLING",
    "RESOURCE",
    "activities",
    "admission",
    "api",
    "inventory",
    "observation",
    "aiotoggles",
    "api_errors",
    "forbidden",
    "application",
    "cause_of",
    "causes",
    "configuration",
    "daemons",
    "ephemera",
    "handler_of",
    "indexing",
    "lifecycles",
    "processing",
    "queueing",
    "references",
    "progression",
    "body_after",
    "merged",
    "changing_cause",
    "execution",
    "handler",
    "handlers_of",
    "parked_state",
    "run_handler",
    "run_handlers",
    "state_for",
]

RESOURCE = references.Resource("kopf.dev", "v1", "kopfexamples")
# Kopf >= 1.38 throttles errors unless told not to (no error reaches it here); 1.37 has no such switch.
NO_THROTTLING = ({"no_throttling": True} if "no_throttling" in inspect.signature(
    processing.process_resource_event).parameters else {})
Reason = causes.Reason


def changing_cause(
    body: Mapping[str, Any],
    logger: logging.Logger,
    *,
    reason: Any = causes.Reason.DELETE,
) -> causes.ChangingCause:
    return causes.ChangingCause(
        logger=logger,
        indices={},
        resource=RESOURCE,
        patch=patches.Patch(),
        body=bodies.Body(copy.deepcopy(dict(body))),  # type: ignore[arg-type]
        memo=ephemera.Memo(),  # type: ignore[arg-type]
        initial=False,
        reason=reason,
    )


def handler(
    fn: Callable[..., Any],
    *,
    id: str = "h",
    retries: int | None = None,
    timeout: float | None = None,
    errors: str | None = None,
    backoff: float | None = None,
) -> execution.Handler:
    return execution.Handler(
        id=id,  # type: ignore[arg-type]  # HandlerId is a NewType of str
        fn=fn,
        param=None,
        errors=execution.ErrorsMode[errors] if errors is not None else None,
        timeout=timeout,
        retries=retries,
        backoff=backoff,
    )


def state_for(handlers: Collection[execution.Handler]) -> progression.State:
    """A fresh state: every handler is awakened (never run in this cause)."""
    return progression.State.from_scratch().with_handlers(handlers)


def parked_state(
    handlers: Collection[execution.Handler], outcomes: Mapping[str, execution.Outcome]
) -> Any:  # a progression.State, indexed by plain str ids in the tests
    """The state Kopf stores after the given outcomes: e.g. ``delayed`` ten years ahead."""
    return state_for(handlers).with_outcomes(dict(outcomes))  # type: ignore[arg-type]


async def run_handlers(
    handlers: Collection[execution.Handler],
    cause: causes.ChangingCause,
    state: Any = None,
    settings: configuration.OperatorSettings | None = None,
) -> dict[str, Any]:  # Kopf's Outcome objects, by handler id
    """Kopf's ``execute_handlers_once``, looked up now: patched or not, whatever is in place."""
    outcomes = await execution.execute_handlers_once(
        lifecycle=lifecycles.all_at_once,
        settings=settings if settings is not None else configuration.OperatorSettings(),
        handlers=handlers,
        cause=cause,
        state=state if state is not None else state_for(handlers),
    )
    return {str(handler_id): outcome for handler_id, outcome in outcomes.items()}


async def run_handler(handler: execution.Handler, cause: causes.ChangingCause, state: Any = None) -> Any:
    """Kopf's ``execute_handler_once`` entered directly, as Kopf's daemons and timers enter it:
    outside of a reaction cycle."""
    states = state if state is not None else state_for([handler])
    return await execution.execute_handler_once(
        settings=configuration.OperatorSettings(), handler=handler, cause=cause, state=states[handler.id],
    )


def body_after(cause: causes.ChangingCause, **changes: Any) -> dict[str, Any]:
    """The object as the next event shows it: the cause's body with its whole patch applied (a
    JSON merge-patch: ``None`` removes), plus top-level ``changes`` (e.g. ``spec=...``)."""
    body: dict[str, Any] = merged(copy.deepcopy(dict(cause.body)), copy.deepcopy(dict(cause.patch)))
    body.update(changes)
    return body


def merged(value: Any, patch: Any) -> Any:
    """RFC 7386: ``value`` with a JSON merge patch applied (``None`` removes a key); neither is changed."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = copy.deepcopy(dict(value)) if isinstance(value, Mapping) else {}
    for key, change in patch.items():
        if change is None:
            result.pop(key, None)
        else:
            result[key] = merged(result.get(key), change)
    return result


def handlers_of(registry: kopf.OperatorRegistry) -> list[execution.Handler]:
    """The change handlers a registry holds (Kopf's private attribute, kept here)."""
    changing: registries.ChangingRegistry = registry._changing
    return list(changing.get_all_handlers())


# --- every kind of handler: a real Kopf handler from Kopf's own decorator, and its cause ---------

def handler_of(kind: str, fn: Callable[..., Any], **options: Any) -> execution.Handler:
    """The handler that Kopf's decorator for this kind registers (a change handler for "change")."""
    registry = kopf.OperatorRegistry()
    resource = ("kopf.dev", "v1", "kopfexamples")
    decorators: dict[str, Callable[..., Any]] = {
        "change": lambda: kopf.on.delete(*resource, registry=registry, **options),
        "timer": lambda: kopf.timer(*resource, interval=options.pop("interval", 60), registry=registry, **options),
        "daemon": lambda: kopf.daemon(*resource, registry=registry, **options),
        "activity": lambda: kopf.on.startup(registry=registry, **options),
        "webhook": lambda: kopf.on.validate(*resource, registry=registry, **options),
        "event": lambda: kopf.on.event(*resource, registry=registry, **options),
        "index": lambda: kopf.index(*resource, registry=registry, **options),
    }
    decorators[kind]()(fn)
    found = [*registry._changing.get_all_handlers(), *registry._spawning.get_all_handlers(),
             *registry._activities.get_all_handlers(), *registry._webhooks.get_all_handlers(),
             *registry._watching.get_all_handlers(), *registry._indexing.get_all_handlers()]
    return found[0]  # type: ignore[no-any-return]


def cause_of(kind: str, body: Mapping[str, Any], logger: logging.Logger) -> Any:
    """The cause Kopf builds for handlers of this kind (timers and daemons share DaemonCause)."""
    common: dict[str, Any] = dict(logger=logger, indices={}, memo=ephemera.Memo())
    resource: dict[str, Any] = dict(
        common, resource=RESOURCE, patch=patches.Patch(),
        body=bodies.Body(copy.deepcopy(dict(body))),  # type: ignore[arg-type]
    )
    if kind == "change":
        return changing_cause(body, logger)
    if kind in ("timer", "daemon"):
        return causes.DaemonCause(**resource, stopper=stoppers.DaemonStopper())
    if kind == "activity":
        return causes.ActivityCause(**common, activity=causes.Activity.STARTUP,
                                    settings=configuration.OperatorSettings())
    if kind == "webhook":
        return causes.WebhookCause(**resource, dryrun=False, reason=causes.WebhookType.VALIDATING,
                                   webhook=None, headers={}, sslpeer={}, userinfo={}, warnings=[],
                                   operation="CREATE", subresource=None)
    if kind == "event":
        return causes.WatchingCause(**resource, type="MODIFIED", event={"type": "MODIFIED", "object": body})
    if kind == "index":
        return causes.IndexingCause(**resource)
    raise ValueError(f"no cause for the kind {kind!r}")



def forbidden(message: str) -> api_errors.APIForbiddenError:
    """Kopf's error for an HTTP 403, as its API client raises it (Kopf 1.37 has no headers)."""
    payload: Any = {"message": message, "code": 403}
    try:
        return api_errors.APIForbiddenError(payload, status=403, headers={})
    except TypeError:
        return api_errors.APIForbiddenError(payload, status=403)  # type: ignore[call-arg]
