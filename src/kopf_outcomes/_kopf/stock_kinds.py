"""
The kinds left to stock Kopf (:data:`kopf_outcomes.kinds.STOCK`): Kopf's own cycle and run, with
no plugin, policy, memory or observer in between; only a handler's own outcome is refused, as the
kind's row of the table says (:func:`.translation.refuse`).
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from kopf_outcomes._kopf import translation
from kopf_outcomes._kopf.cycle import Cycle, end, enter
from kopf_outcomes._kopf.internals import (
    Cause,
    ErrorsMode,
    ExtraContext,
    Handler,
    HandlerId,
    KopfOutcome,
    LifeCycleFn,
    OperatorSettings,
    State,
)
from kopf_outcomes.outcomes import Outcome, Success


class Refused(BaseException):
    """A handler's own outcome in a stock kind: carried past Kopf's ``except Exception``, unlogged,
    to :func:`handlers_once`, which refuses it."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome)
        self.outcome = outcome


async def invoke(invoke_handler: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """A run of a stock kind: Kopf's own reading of its result or error. A Success is its value
    (the table's cell); any other outcome of the handler's own is refused."""
    result: object
    try:
        result = await invoke_handler(**kwargs)
    except Outcome as e:
        result = e
    if isinstance(result, Success):
        return result.result
    if isinstance(result, Outcome):
        raise Refused(result)
    return result


async def handlers_once(execute_handler_once: Callable[..., Any], cycle: Cycle, lifecycle: LifeCycleFn,
                        settings: OperatorSettings, handlers: Collection[Handler], cause: Cause, state: State,
                        extra_context: ExtraContext, default_errors: ErrorsMode) -> Mapping[HandlerId, KopfOutcome]:
    """Kopf's ``execute_handlers_once`` as it is, with Kopf's own ``execute_handler_once``."""
    token = enter(cycle)
    try:
        handlers_todo = [h for h in handlers if state[h.id].awakened]
        handlers_plan = lifecycle(handlers_todo, state=state, **cause.kwargs)
        outcomes: dict[HandlerId, KopfOutcome] = {}
        for handler in handlers_plan:
            try:
                outcomes[handler.id] = await execute_handler_once(
                    settings=settings, handler=handler, state=state[handler.id], cause=cause,
                    lifecycle=lifecycle, extra_context=extra_context, default_errors=default_errors)
            except Refused as refused:
                outcomes[handler.id] = translation.refuse(cycle.kind, handler, refused.outcome, cause.logger)
        return outcomes
    finally:
        end(token)
