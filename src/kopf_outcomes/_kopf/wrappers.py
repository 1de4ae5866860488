"""
The four wrapped Kopf functions. Each is thin: it reads what Kopf passes, asks the engine, and
hands the answer to :mod:`.translation`; everything it does not decide stays Kopf's own.

- ``execution.invoke_handler`` — reads the handler's result or exception through the plugins.
  When the built-ins say "stock", the run continues in Kopf untouched: that is stock parity.
- ``execution.execute_handler_once`` — turns our decisions into Kopf's outcome.
- ``execution.execute_handlers_once`` — also wakes parked handlers whose state has changed.
- ``application.apply`` — parked handlers neither make Kopf sleep nor "touch-dummy" the object;
  rechecks sleep there and run again without a write (:mod:`.requeue`).
- ``queueing.worker`` — the per-object worker, so that a recheck can queue the object's event again.
- ``queueing.watcher`` — only to tell its workers Kopf's pause: a paused replica requeues nothing.
"""
from __future__ import annotations

import asyncio
import datetime
from collections.abc import Collection, Mapping
from typing import Any

import kopf

from kopf_outcomes import engine
from kopf_outcomes._kopf import cycle, requeue, runs, translation
from kopf_outcomes._kopf.internals import (
    Cause,
    ErrorsMode,
    ExtraContext,
    Handler,
    HandlerChildrenRetry,
    HandlerId,
    HandlerState,
    KopfOutcome,
    LifeCycleFn,
    OperatorSettings,
    State,
    application,
    execution,
    no_extra_context,
    progress_of,
    queueing,
)
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.memory import MemoryRecord
from kopf_outcomes.options import declared
from kopf_outcomes.outcomes import Fatal, Outcome
from kopf_outcomes.runs import HandlerRun


class _Decided(BaseException):
    """Carries a decided outcome past Kopf's own ``except Exception`` handling, unlogged."""

    def __init__(self, outcome: Outcome, run: HandlerRun, subrefs: Collection[HandlerId]) -> None:
        super().__init__(outcome)
        self.outcome = outcome
        self.run = run
        self.subrefs = subrefs  # the sub-handlers it ran, for Kopf to purge their states later


class Patch:
    """One installation's wrappers of Kopf's functions; ``attach()`` puts them in, ``detach()`` back."""

    def __init__(self, plugins: PluginManager) -> None:
        self.plugins = plugins
        self.originals: dict[tuple[Any, str], Any] = {
            (execution, "invoke_handler"): execution.invoke_handler,
            (execution, "execute_handler_once"): execution.execute_handler_once,
            (execution, "execute_handlers_once"): execution.execute_handlers_once,
            (application, "apply"): application.apply,
            (queueing, "worker"): queueing.worker,
            (queueing, "watcher"): queueing.watcher,
        }
        # Direct references: every handler run goes through them.
        self._invoke_handler = execution.invoke_handler
        self._execute_handler_once = execution.execute_handler_once
        self._apply = application.apply
        self.worker = requeue.wrap_worker(queueing.worker)
        self.watcher = requeue.wrap_watcher(queueing.watcher)  # its workers learn Kopf's pause

    def attach(self) -> None:
        for module, name in self.originals:
            setattr(module, name, getattr(self, name))

    def detach(self) -> None:
        for (module, name), original in self.originals.items():
            setattr(module, name, original)

    async def invoke_handler(self, **kwargs: Any) -> Any:
        plugins = self.plugins
        handler: Handler = kwargs["handler"]
        cause: Cause = kwargs["cause"]
        try:
            result = await self._invoke_handler(**kwargs)
        except HandlerChildrenRetry:
            raise  # Kopf's own sub-handler bookkeeping, not the handler's verdict
        except Exception as e:
            ours = isinstance(e, Outcome) or (isinstance(e, kopf.PermanentError) and self._retains(handler, cause))
            if plugins.decides_builtin and not ours:
                raise
            run = self._run(handler, cause, kwargs)
            outcome = engine.decide(plugins, run, exception=e)
            if outcome is None:
                raise
            raise _Decided(outcome, run, kwargs["subrefs"]) from e
        if plugins.decides_builtin and not isinstance(result, Outcome):
            if not (declared or plugins.provides_options) or not runs.option(
                    plugins, handler, cause, "explicit_completion"):
                return result
        run = self._run(handler, cause, kwargs)
        outcome = engine.decide(plugins, run, result=result)
        if outcome is None:
            return result
        raise _Decided(outcome, run, kwargs["subrefs"])

    def _retains(self, handler: Handler, cause: Cause) -> bool:
        """Kopf's PermanentError on deletion with fatal_on_delete="retain" is ours to realize."""
        return runs.options_of(self.plugins, handler, cause).fatal_on_delete == "retain"

    def _run(self, handler: Handler, cause: Cause, kwargs: Mapping[str, Any]) -> HandlerRun:
        context = cycle.current() or cycle.make(kwargs["settings"], cause, (handler,))
        previous = context.records.get(str(handler.id))
        return runs.build(self.plugins, handler, cause, kwargs["retry"], kwargs["runtime"].total_seconds(),
                          kwargs["settings"], previous)

    async def execute_handler_once(
        self,
        settings: OperatorSettings,
        handler: Handler,
        cause: Cause,
        state: HandlerState,
        lifecycle: LifeCycleFn | None = None,
        extra_context: ExtraContext = no_extra_context,
        default_errors: ErrorsMode = ErrorsMode.TEMPORARY,
    ) -> KopfOutcome:
        plugins = self.plugins
        context = cycle.current()  # None without a cycle (see cycle.current): made only when needed
        handler_id = str(handler.id)
        if state.message is not None and cycle.is_parked(state, cycle.RETAINED_ONLY):  # only a retained one is released
            context = context or cycle.make(settings, cause, (handler,))
            record = cycle.record_of(context, handler_id, state)
            if record is not None and record["outcome"] == "retained" and runs.body_of(cause) is not None:
                return self._release(context, handler, cause, state, settings, record)
        # Only plugins need the caller's errors mode (to read arbitrary exceptions as Kopf would).
        errors = None if plugins.decides_builtin else runs.default_errors.set(default_errors)
        try:
            outcome = await self._execute_handler_once(
                settings=settings, handler=handler, cause=cause, state=state, lifecycle=lifecycle,
                extra_context=extra_context, default_errors=default_errors,
            )
        except _Decided as decided:
            return translation.realize(plugins, context or cycle.make(settings, cause, (handler,)), decided.run,
                                       decided.outcome, handler, cause, state, decided.subrefs)
        finally:
            if errors is not None:
                runs.default_errors.reset(errors)
        # Stock Kopf decided. Keep the memory right and tell the observers, if there are any.
        remember = (declared or plugins.provides_options) and runs.option(plugins, handler, cause, "remember")
        remembered = handler_id in context.records if context is not None else cycle.has_memory(cause, settings)
        if not remember and not remembered:
            if not plugins.observed:
                return outcome  # the hot path: nothing remembered before or now, nobody to tell
            keys = context.keys if context is not None else cycle.keys_of(settings)
            run = runs.build(plugins, handler, cause, state.retries, state, settings, None)
            return translation.tell(plugins, keys, run, handler, cause, translation.from_kopf(outcome), outcome)
        context = context or cycle.make(settings, cause, (handler,))
        record = cycle.record_of(context, handler_id, state)
        if record is None and not remember and not plugins.observed:
            return outcome
        run = runs.build(plugins, handler, cause, state.retries, state, settings, record)
        return translation.conclude(plugins, context, run, handler, cause, translation.from_kopf(outcome), outcome)

    def _release(self, context: cycle.Cycle, handler: Handler, cause: Cause, state: HandlerState,
                 settings: OperatorSettings, record: MemoryRecord) -> KopfOutcome:
        """A retained finalizer, released by the annotation a person set (the wake-up checked it)."""
        cause.logger.warning(f"{handler} is released by the annotation {context.keys.release!r}; "
                             f"the finalizer is no longer retained.")
        run = runs.build(self.plugins, handler, cause, state.retries, state, settings, record)
        return translation.conclude(self.plugins, context, run, handler, cause,
                                    Fatal(record["reason"], on_delete="release"),
                                    KopfOutcome(final=True, exception=kopf.PermanentError(record["reason"])))

    async def execute_handlers_once(
        self,
        lifecycle: LifeCycleFn,
        settings: OperatorSettings,
        handlers: Collection[Handler],
        cause: Cause,
        state: State,
        extra_context: ExtraContext = no_extra_context,
        default_errors: ErrorsMode = ErrorsMode.TEMPORARY,
    ) -> Mapping[HandlerId, KopfOutcome]:
        """Kopf's own selection of awakened handlers, plus the parked ones whose state changed."""
        context, token = cycle.start(settings, cause, handlers, state)
        try:
            if self.plugins.observes_objects:
                cycle.observe_object(self.plugins, context, handlers, cause, state)
            handlers_todo, woken, waiting, waits = [], [], [], []
            now = datetime.datetime.now(datetime.timezone.utc) if context.records else None
            for h in handlers:
                handler_state = progress_of(state, h)
                wait = (None if now is None or handler_state.finished
                        else cycle.recheck_wait(self.plugins, context, h, cause, now))
                if wait is not None and wait > 0:  # rechecking, not due yet (Kopf's stored delay is stale)
                    waiting.append(h.id)
                    waits.append(wait)
                elif wait is not None or handler_state.awakened:  # due by our schedule, or by Kopf's
                    handlers_todo.append(h)
                elif cycle.wakes(self.plugins, context, h, cause, handler_state):
                    handlers_todo.append(h)
                    woken.append(h)
            handlers_plan = lifecycle(handlers_todo, state=state, **cause.kwargs)
            outcomes: dict[HandlerId, KopfOutcome] = {}
            for handler in handlers_plan:
                outcomes[handler.id] = await execution.execute_handler_once(
                    settings=settings,
                    handler=handler,
                    state=state[handler.id],
                    cause=cause,
                    lifecycle=lifecycle,
                    extra_context=extra_context,
                    default_errors=default_errors,
                )
            # A finished handler that saw an older state and is not planned now (the lifecycle
            # runs one at a time) is re-armed, so that the cause does not end before it re-runs.
            for handler in woken:
                if handler.id not in outcomes and progress_of(state, handler).finished:
                    outcomes[handler.id] = KopfOutcome(final=False, delay=0)
            for handler_id, outcome in list(outcomes.items()):
                if isinstance(outcome.exception, cycle.Rechecking):
                    waits.append(outcome.delay or 0)
                    if outcome.exception.quiet:  # nothing new to store: Kopf keeps its progress as it is
                        del outcomes[handler_id]
                        waiting.append(handler_id)
            cycle.remember_ours(handlers, state, outcomes, waiting)
            requeue.schedule(waits)
            return outcomes
        finally:
            cycle.end(token)

    async def apply(self, **kwargs: Any) -> Any:
        """Kopf's apply, blind to our delays: no sleeping for them, no touch-dummy writes. Rechecks
        sleep here instead, and then run again without a write (:mod:`.requeue`)."""
        if "delays" in kwargs:
            kwargs["delays"] = cycle.unparked_delays(kwargs["delays"])
        rechecks = requeue.take()
        if not rechecks:
            return await self._apply(**kwargs)
        if kwargs.get("delays"):  # Kopf sleeps for its own delays anyway: let it wake for ours too
            now = asyncio.get_running_loop().time()
            kwargs["delays"] = [*kwargs["delays"], *(max(0.0, due - now) for due in rechecks)]
            return await self._apply(**kwargs)
        nothing_to_write = not kwargs.get("patch")
        result = await self._apply(**kwargs)
        if nothing_to_write:  # else the write's own event starts the next cycle, which schedules anew
            await requeue.sleep_and_requeue(min(rechecks), kwargs.get("stream_pressure"))
        return result
