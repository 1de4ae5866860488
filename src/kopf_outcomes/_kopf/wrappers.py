"""
The wrapped Kopf functions. Each is thin: it reads what Kopf passes, asks the engine, and
hands the answer to :mod:`.translation`; everything it does not decide stays Kopf's own.

- ``execution.invoke_handler`` — reads the handler's result or exception through the plugins.
  When the built-ins say "stock", the run continues in Kopf untouched: that is stock parity.
- ``execution.execute_handler_once`` — turns our decisions into Kopf's outcome.
- ``execution.execute_handlers_once`` — also wakes parked handlers whose state has changed.
- ``application.apply`` — parked handlers neither make Kopf sleep nor "touch-dummy" the object;
  rechecks sleep there and run again without a write (:mod:`.requeue`).
- ``queueing.worker`` — the per-object worker, so that a recheck can queue the object's event again.
- ``queueing.watcher`` — only to tell its workers Kopf's pause: a paused replica requeues nothing.
- ``finalizers.allow_deletion`` — no release of an object whose deletion handler waits (:mod:`.held`).
"""
from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import inspect
import logging
from collections.abc import Collection, Mapping
from typing import Any

import kopf

from kopf_outcomes import engine, objects
from kopf_outcomes._kopf import children, cycle, deadlines, delays, dependents, held, kopf_runs, requeue, translation
from kopf_outcomes._kopf.internals import (
    CHANGE,
    SUBHANDLER,
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
    finalizers,
    handler_var,
    no_extra_context,
    progress_of,
    queueing,
    with_outcomes,
)
from kopf_outcomes._kopf.marks import Parked, Rechecking
from kopf_outcomes.kinds import STOCK
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.memory import MemoryRecord
from kopf_outcomes.options import declared
from kopf_outcomes.outcomes import Fatal, Outcome, Pending, Success
from kopf_outcomes.runs import HandlerRun

_LOGGER = logging.getLogger("kopf_outcomes")


# Kopf's invoke_handler's parameters (keyword-only), the same from Kopf 1.37 to 1.45.
_INVOKE_PARAMETERS = ("handler", "cause", "retry", "started", "runtime", "settings", "lifecycle", "subrefs",
                      "extra_context")


class _Decided(BaseException):
    """Carries a decided outcome past Kopf's own ``except Exception`` handling, unlogged."""

    def __init__(self, outcome: Outcome, run: HandlerRun, subrefs: Collection[HandlerId]) -> None:
        super().__init__(outcome)
        self.outcome = outcome
        self.run = run
        self.subrefs = subrefs  # the sub-handlers it ran, for Kopf to purge their states later


class _Refused(BaseException):
    """A handler's own outcome in a stock kind (``kinds.STOCK``): refused where Kopf called it."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome)
        self.outcome = outcome


class Wrappers:
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
            (finalizers, "allow_deletion"): finalizers.allow_deletion,
        }
        # Direct references: every handler run goes through them.
        self._invoke_handler = execution.invoke_handler
        self._plain_invoke = tuple(inspect.signature(execution.invoke_handler).parameters) == _INVOKE_PARAMETERS
        self._execute_handler_once = execution.execute_handler_once
        self._apply = application.apply
        self.worker = requeue.wrap_worker(queueing.worker, self._gone)
        self.watcher = requeue.wrap_watcher(queueing.watcher)  # its workers learn Kopf's pause
        self.allow_deletion = held.wrap(finalizers.allow_deletion)  # no release while a handler waits

    def attach(self) -> None:
        for module, name in self.originals:
            setattr(module, name, getattr(self, name))
        if not self._plain_invoke:  # a Kopf whose invoke_handler has other parameters
            execution.invoke_handler = self.invoke_handler_any

    def detach(self) -> None:
        for (module, name), original in self.originals.items():
            setattr(module, name, original)

    def _gone(self, resource: Any, body: Mapping[str, Any]) -> None:
        """An object has left the cluster: the plugins that keep state per object forget it."""
        plugins = self.plugins
        if plugins.observes_gone:
            ref = kopf_runs.resource_ref(resource) if resource is not None else None
            engine.guarded(plugins, _LOGGER, "kopf_outcomes_object_gone",
                           lambda: plugins.hook.kopf_outcomes_object_gone(resource=ref, body=body), None)

    async def invoke_handler(self, *, handler: Handler, cause: Cause, retry: int, started: datetime.datetime,
                             runtime: datetime.timedelta, settings: OperatorSettings, lifecycle: LifeCycleFn | None,
                             subrefs: set[HandlerId], extra_context: ExtraContext) -> Any:
        """Kopf's ``invoke_handler``, its keyword-only parameters named one by one (the same in
        every supported Kopf): a ``**kwargs`` wrapper gathers a dict and unpacks it on every run.
        A Kopf with other parameters gets :meth:`invoke_handler_any` instead (``attach``)."""
        context = cycle.current()
        if context is not None:
            if not context.persists and context.kind in STOCK:  # as decided for the cycle (execute_handlers_once)
                return await self._invoke_stock(dict(
                    handler=handler, cause=cause, retry=retry, started=started, runtime=runtime, settings=settings,
                    lifecycle=lifecycle, subrefs=subrefs, extra_context=extra_context))
            if context.records:  # quiet rechecks are attempts too (docs/outcomes.md)
                record = context.records.get(str(handler.id))
                if record is not None and record.get("recheck"):
                    retry += requeue.quiet_attempts(record, datetime.datetime.now(datetime.timezone.utc))
        plugins = self.plugins
        try:
            result = await self._invoke_handler(
                handler=handler, cause=cause, retry=retry, started=started, runtime=runtime, settings=settings,
                lifecycle=lifecycle, subrefs=subrefs, extra_context=extra_context)
        except HandlerChildrenRetry:
            raise  # Kopf's own sub-handler bookkeeping, not the handler's verdict
        except Exception as e:
            if plugins.decides_builtin and not isinstance(e, Outcome):
                raise
            run = self._run(handler, cause, retry, runtime, settings)
            outcome = engine.decide(plugins, run, exception=e)
            if outcome is None:
                raise
            raise _Decided(outcome, run, subrefs) from e
        if plugins.decides_builtin and not isinstance(result, Outcome):
            if not (declared or plugins.provides_options) or not kopf_runs.option(
                    plugins, handler, cause, "explicit_completion"):  # its gate, inline
                return result
        run = self._run(handler, cause, retry, runtime, settings)
        outcome = engine.decide(plugins, run, result=result)
        if outcome is None:
            return result
        raise _Decided(outcome, run, subrefs)

    async def invoke_handler_any(self, **kwargs: Any) -> Any:
        """:meth:`invoke_handler` for a Kopf whose ``invoke_handler`` has other parameters:
        Kopf's arguments passed on as they are."""
        handler: Handler = kwargs["handler"]
        context = cycle.current()
        if context is not None:
            if not context.persists and context.kind in STOCK:
                return await self._invoke_stock(kwargs)
            if context.records:  # quiet rechecks are attempts too (docs/outcomes.md)
                record = context.records.get(str(handler.id))
                if record is not None and record.get("recheck"):
                    now = datetime.datetime.now(datetime.timezone.utc)
                    kwargs["retry"] = kwargs["retry"] + requeue.quiet_attempts(record, now)
        plugins = self.plugins
        try:
            result = await self._invoke_handler(**kwargs)
        except HandlerChildrenRetry:
            raise
        except Exception as e:
            if plugins.decides_builtin and not isinstance(e, Outcome):
                raise
            run = self._run(handler, kwargs["cause"], kwargs["retry"], kwargs["runtime"], kwargs["settings"])
            outcome = engine.decide(plugins, run, exception=e)
            if outcome is None:
                raise
            raise _Decided(outcome, run, kwargs["subrefs"]) from e
        if plugins.decides_builtin and not isinstance(result, Outcome):
            if not (declared or plugins.provides_options) or not kopf_runs.option(
                    plugins, handler, kwargs["cause"], "explicit_completion"):
                return result
        run = self._run(handler, kwargs["cause"], kwargs["retry"], kwargs["runtime"], kwargs["settings"])
        outcome = engine.decide(plugins, run, result=result)
        if outcome is None:
            return result
        raise _Decided(outcome, run, kwargs["subrefs"])

    async def _invoke_stock(self, kwargs: dict[str, Any]) -> Any:
        """A run of a stock kind: Kopf's own reading of its result or error. A Success is its value
        (the table's cell); any other outcome of the handler's own is refused."""
        result: object
        try:
            result = await self._invoke_handler(**kwargs)
        except Outcome as e:
            result = e
        if isinstance(result, Success):
            return result.result
        if isinstance(result, Outcome):
            raise _Refused(result)
        return result

    def _run(self, handler: Handler, cause: Cause, retry: int, runtime: datetime.timedelta,
             settings: OperatorSettings) -> HandlerRun:
        """The run as hooks see it, from Kopf's arguments of ``invoke_handler``."""
        context = cycle.of(settings, cause, handler)
        previous = context.records.get(str(handler.id))
        return kopf_runs.build(self.plugins, context.kind, handler, cause, retry, runtime.total_seconds(), settings,
                               previous)

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
        if state.message is not None and cycle.is_parked(state, cycle.RETAINED_ONLY):  # only a retained one is released
            context = cycle.of(settings, cause, handler)
            record = cycle.record_of(context, str(handler.id), state)
            if record is not None and record["outcome"] == "retained" and kopf_runs.body_of(cause) is not None:
                return self._release(context, handler, cause, state, settings, record)
        # Only plugins need the caller's errors mode (to read arbitrary exceptions as Kopf would).
        errors = None if plugins.decides_builtin else kopf_runs.default_errors.set(default_errors)
        try:
            # By position (Kopf's order of its parameters): keywords cost every run their matching.
            outcome = await self._execute_handler_once(settings, handler, cause, state, lifecycle,
                                                       extra_context, default_errors)
        except _Decided as decided:
            context = cycle.of(settings, cause, handler)
            return translation.realize(translation.turn(plugins, context, decided.run, handler, cause, state),
                                       decided.outcome, decided.subrefs)
        finally:
            if errors is not None:
                kopf_runs.default_errors.reset(errors)
        # Stock Kopf decided. Its final failures pass the finalizer guard; sub-handlers that wait
        # for us make their parent wait with them; the memory is kept right, observers told.
        if outcome.exception is not None:
            waited = self._unstock(cycle.of(settings, cause, handler), handler, cause, state, settings, outcome)
            if waited is not None:
                return waited
            if isinstance(outcome.exception, HandlerChildrenRetry):
                return outcome  # Kopf's bookkeeping of its children, not a verdict to remember or tell
        # kopf_runs.option's gate, inline: this is every run's path.
        remember = (declared or plugins.provides_options) and kopf_runs.option(plugins, handler, cause, "remember")
        handler_id = str(handler.id)
        remembered = handler_id in context.records if context is not None else cycle.has_memory(cause, settings)
        if not remember and not remembered:
            if not plugins.observed:
                return outcome  # the hot path: nothing remembered before or now, nobody to tell
            if context is None:  # a run that no cycle started (see cycle.current): told as a change's
                kind, keys = CHANGE, cycle.keys_for(settings.persistence.finalizer)
            else:
                kind, keys = context.kind, context.keys
            run = kopf_runs.build(plugins, kind, handler, cause, state.retries, state, settings, None)
            return translation.tell(plugins, kind, keys, run, handler, cause, translation.from_kopf(outcome), outcome)
        context = cycle.of(settings, cause, handler)
        record = cycle.record_of(context, handler_id, state)
        if record is None and not remember and not plugins.observed:
            return outcome
        turn = self._turn(context, handler, cause, state, settings, record)
        return translation.conclude(turn, translation.from_kopf(outcome), outcome)

    def _turn(self, context: cycle.Cycle, handler: Handler, cause: Cause, state: HandlerState,
              settings: OperatorSettings, record: MemoryRecord | None) -> translation.Turn:
        run = kopf_runs.build(self.plugins, context.kind, handler, cause, state.retries, state, settings, record)
        return tuple.__new__(translation.Turn, (self.plugins, context, run, handler, cause, state))

    def _unstock(self, context: cycle.Cycle, handler: Handler, cause: Cause, state: HandlerState,
                 settings: OperatorSettings, outcome: KopfOutcome) -> KopfOutcome | None:
        """Kopf's own outcome where it is ours to realize: a parent whose unfinished sub-handlers
        all wait for us (Pending or retained) waits with them; a final failure that the finalizer
        guard retains. None: Kopf's outcome stands."""
        if not context.persists:
            return None
        handler_id = str(handler.id)
        if isinstance(outcome.exception, HandlerChildrenRetry):
            waiting = context.children.pop(handler_id, None)
            if waiting is None:
                return None  # the children are Kopf's: Kopf's retry of them stands
            if not isinstance(waiting, Pending):  # some are Kopf's: its retry, when the first is due
                return dataclasses.replace(outcome, delay=waiting)
            turn = self._turn(context, handler, cause, state, settings, cycle.record_of(context, handler_id, state))
            return translation.realize(turn, waiting, outcome.subrefs)
        if not outcome.final:
            return None
        # A parent ending for good (its retries= or timeout=) must not release what a child retains.
        held = cycle.holds_retained_child(context, handler_id)
        if not held and kopf_runs.option(self.plugins, handler, cause, "fatal_on_delete") != "retain":
            return None
        turn = self._turn(context, handler, cause, state, settings, cycle.record_of(context, handler_id, state))
        return translation.retain_stock(turn, outcome, on_delete="retain" if held else None)

    def _release(self, context: cycle.Cycle, handler: Handler, cause: Cause, state: HandlerState,
                 settings: OperatorSettings, record: MemoryRecord) -> KopfOutcome:
        """A retained finalizer, released by the annotation a person set (the wake-up checked it)."""
        cause.logger.warning(f"{handler} is released by the annotation {context.keys.release!r}; "
                             f"the finalizer is no longer retained.")
        turn = self._turn(context, handler, cause, state, settings, record)
        return translation.conclude(turn, Fatal(record["reason"], on_delete="release"),
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
        context = cycle.make(settings, cause, handlers, state)
        if not context.persists and context.kind in STOCK:  # the one place where a kind is left to stock Kopf
            return await self._stock_handlers_once(context, lifecycle, settings, handlers, cause, state,
                                                   extra_context, default_errors)
        parent = cycle.current() if context.kind is SUBHANDLER else None  # the change handler's cycle
        token = cycle.enter(context)
        try:
            # Handlers whose other objects are unknown (dependents.take says why) do not run: ours to hold.
            unknown: dict[str, float | None] | None = None
            if objects.declared:
                taken, unknown = dependents.take(context.kind, handlers, cause)
                context.objects.update(taken)
            if self.plugins.observes_objects and context.kind is CHANGE:
                cycle.observe_object(self.plugins, context, handlers, cause, state)
            handlers_todo, woken, waiting, waits = [], [], [], []
            now = datetime.datetime.now(datetime.timezone.utc) if context.records else None
            for h in handlers:
                handler_state: HandlerState = state[h.id]  # type: ignore[assignment]  # progress_of, inline: every cycle
                wait = (None if now is None or handler_state.finished
                        else cycle.recheck_wait(self.plugins, context, h, cause, now))
                due = None if now is None or handler_state.finished \
                    else deadlines.wait(context.records.get(str(h.id)), now)
                if unknown and str(h.id) in unknown:
                    waiting.append(h.id)  # held until its objects are known: no deadline runs it before
                    again = unknown[str(h.id)]
                    if again is not None:  # looked at again then (a listing under way; a held sub-handler)
                        waits.append(again)
                    continue
                elif due == 0.0:  # its escalation's deadline has come: it runs, and escalates
                    handlers_todo.append(h)
                    woken.append(h)
                    continue
                elif wait is not None and wait > 0:  # rechecking, not due yet (Kopf's stored delay is stale)
                    waiting.append(h.id)
                    waits.append(wait)
                elif wait is not None or handler_state.awakened:  # due by our schedule, or by Kopf's
                    handlers_todo.append(h)
                    continue
                elif cycle.wakes(self.plugins, context, h, cause, handler_state):
                    handlers_todo.append(h)
                    woken.append(h)
                    continue
                if due is not None:  # still waiting: it runs at its deadline, without a write before
                    waits.append(due + deadlines.MARGIN)
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
                elif handler.id not in outcomes:  # an unfinished one: the next cycle runs it, at once and
                    waits.append(0.0)  # without a write (the one planned may conclude quietly: no event)
            ours = {str(handler_id) for handler_id in waiting} if waiting else set()
            for handler_id, outcome in list(outcomes.items()):
                if not isinstance(outcome.exception, (Parked, Rechecking)):
                    continue  # Kopf's own
                ours.add(str(handler_id))
                if isinstance(outcome.exception, Rechecking):
                    requeue.ran(str(handler_id))
                    waits.append(self._next_recheck(context, str(handler_id), outcome))
                due = deadlines.until(outcome.exception.deadline, datetime.datetime.now(datetime.timezone.utc))
                if due is not None:
                    waits.append(due + deadlines.MARGIN)
                if str(handler_id) in context.quiet:  # nothing new to store: Kopf keeps its progress
                    del outcomes[handler_id]
                    waiting.append(handler_id)
            if parent is not None:  # sub-handlers: the parent's run decides the delays
                waited = children.waiting(handlers, state, outcomes, waiting, context.records, waits, unknown or {})
                if waited is not None:
                    parent.children[str(handler_var.get().id)] = waited
                cycle.track(context, handlers)
                parent.tracked.update(context.tracked)
                return outcomes
            if context.records or context.tracked:
                cycle.track(context, handlers)
                cycle.refresh(self.plugins, context, cause)
                cycle.prune(context, cause)
            # Which of Kopf's delays are ours (parked, rechecking); none where nothing is ours: a
            # parked handler has a memory, or lost it and was woken to conclude afresh.
            if context.persists and (context.records or ours or woken):
                ours.update(str(h.id) for h in handlers
                            if h.id not in outcomes and cycle.is_parked(progress_of(state, h)))
                final = with_outcomes(state, outcomes) if ours else state
                wake = dependents.wake_keys(context.objects, handlers, context.records, ours, cause) \
                    if context.objects else ()
                delays.tell(getattr(cause, "patch", None), final, ours, waits, wake,
                            functools.partial(dependents.changed, context.objects, handlers, cause) if wake else None)
            return outcomes
        finally:
            cycle.end(token)

    async def _stock_handlers_once(self, context: cycle.Cycle, lifecycle: LifeCycleFn, settings: OperatorSettings,
                                   handlers: Collection[Handler], cause: Cause, state: State,
                                   extra_context: ExtraContext, default_errors: ErrorsMode,
                                   ) -> Mapping[HandlerId, KopfOutcome]:
        """Kopf's ``execute_handlers_once`` as it is, with Kopf's own ``execute_handler_once``: no
        plugin, policy, memory or observer in between; only a handler's own outcome is refused."""
        token = cycle.enter(context)
        try:
            handlers_todo = [h for h in handlers if state[h.id].awakened]
            handlers_plan = lifecycle(handlers_todo, state=state, **cause.kwargs)
            outcomes: dict[HandlerId, KopfOutcome] = {}
            for handler in handlers_plan:
                try:
                    outcomes[handler.id] = await self._execute_handler_once(
                        settings=settings, handler=handler, state=state[handler.id], cause=cause,
                        lifecycle=lifecycle, extra_context=extra_context, default_errors=default_errors)
                except _Refused as refused:
                    outcomes[handler.id] = translation.refuse(context.kind, handler, refused.outcome, cause.logger)
            return outcomes
        finally:
            cycle.end(token)

    @staticmethod
    def _next_recheck(context: cycle.Cycle, handler_id: str, outcome: KopfOutcome) -> float:
        """Seconds to the next point of the grid of a recheck that ran now (not a full interval from
        now: that drifted by each cycle's own time); a new conclusion starts its grid now."""
        record = context.records.get(handler_id)
        if handler_id in context.quiet and record is not None:
            now = datetime.datetime.now(datetime.timezone.utc)
            due = requeue.next_due(record, now, after=True, served=True)
            if due is not None:
                return max(0.0, (due - now).total_seconds())
        return outcome.delay or 0.0

    async def apply(self, **kwargs: Any) -> Any:
        """Kopf's apply, blind to our delays (:mod:`.delays`): no sleeping for them, no touch-dummy
        writes. A recheck due before Kopf's own delays sleeps here instead, and then runs again
        without a write (:mod:`.requeue`); one due later waits for the cycle after Kopf's wake-up."""
        ours = delays.take(kwargs.get("patch"))
        if ours is None:
            return await self._apply(**kwargs)
        stock = kwargs["delays"] = delays.stock(kwargs.get("delays") or (), ours)
        if not ours.rechecks and not ours.wake:
            return await self._apply(**kwargs)
        due = min(ours.rechecks) if ours.rechecks else None
        kopf_due = asyncio.get_running_loop().time() + min(stock) if stock else None
        if kopf_due is not None and not ours.wake and due is not None and kopf_due <= due:
            return await self._apply(**kwargs)  # Kopf wakes first, as it would without us
        if kopf_due is not None:  # ours wake first, or any time: the next cycle computes Kopf's delays again
            due = kopf_due if due is None else min(due, kopf_due)
        kwargs["delays"] = []
        wake = asyncio.Event() if ours.wake else None
        forget = objects.wait(ours.wake, wake) if wake is not None else None
        try:
            if wake is not None and ours.moved is not None and ours.moved():
                wake.set()  # they changed while the handlers ran: no wake-up lost in between
            result = await self._apply(**kwargs)
            # Also after a write: one that changes nothing brings no event to run the next cycle.
            await requeue.sleep_and_requeue(due, kwargs.get("stream_pressure"), wake)
        finally:
            if forget is not None:
                forget()
        return result
