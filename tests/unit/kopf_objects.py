"""
Real Kopf objects for in-process tests of the patched functions.

The one place in the tests that imports Kopf's private modules: when Kopf moves them,
this file is what needs to follow.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

import kopf
from kopf._cogs.configs import configuration
from kopf._cogs.structs import bodies, ephemera, patches, references
from kopf._core.actions import application, execution, lifecycles, progression
from kopf._core.intents import causes, registries

__all__ = [
    "RESOURCE",
    "application",
    "body_after",
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
) -> dict[str, Any]:  # Kopf's Outcome objects, by handler id
    """Kopf's ``execute_handlers_once``, looked up now: patched or not, whatever is in place."""
    outcomes = await execution.execute_handlers_once(
        lifecycle=lifecycles.all_at_once,
        settings=configuration.OperatorSettings(),
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
    """The object as the next event shows it: the cause's body with its patch applied
    (annotations merged, ``None`` removes), plus top-level ``changes`` (e.g. ``spec=...``)."""
    body: dict[str, Any] = copy.deepcopy(dict(cause.body))
    patched = cause.patch.get("metadata", {}).get("annotations", {})
    annotations = body.setdefault("metadata", {}).setdefault("annotations", {})
    for key, value in patched.items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
    body.update(changes)
    return body


def handlers_of(registry: kopf.OperatorRegistry) -> list[execution.Handler]:
    """The change handlers a registry holds (Kopf's private attribute, kept here)."""
    changing: registries.ChangingRegistry = registry._changing
    return list(changing.get_all_handlers())
