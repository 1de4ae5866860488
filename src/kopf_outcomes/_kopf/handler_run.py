"""
One handler run, top to bottom, around Kopf's own ``execute_handler_once``: before it (a release),
inside it (the result read through the plugins), after it (our outcome carried out, or Kopf's
concluded), the conclusion kept and told; each step is a method of :class:`Runs`.

A reaction cycle (:mod:`.reaction`) takes these steps itself (:meth:`Runs.begin`, Kopf's
``execute_handler_once``, :meth:`Runs.decided` or :meth:`Runs.concluded`), with no coroutine of ours
around Kopf's: a coroutine layer costs every run about 1 % of its instructions (benchmarks README,
"the floor"). :meth:`Runs.execute_handler_once` is the same steps for callers of Kopf's internals
that enter it outside of a cycle; :meth:`Runs.through` calls a tool's wrapper of it put in after us.
For the same reason :meth:`Runs.invoke_handler` names Kopf's parameters one by one: a ``**kwargs``
wrapper, gathering and spreading them again, cost a run 1.8 % of its instructions (measured,
2026-12-06); a Kopf with other parameters gets :meth:`Runs.invoke_handler_any`, which passes them on
as they come. Two guards keep calls off every run: options are read only where anything can set one
(``declared or plugins.provides_options``), and a release is looked for only where Kopf's progress
has a message (a retained handler's mark is in it); together 0.75 % of a run with the built-ins,
kept for the hold lines (benchmarks README).
"""
from __future__ import annotations

import contextvars
import dataclasses
import datetime
import inspect
from collections.abc import Callable, Collection
from typing import Any

from kopf_outcomes import engine
from kopf_outcomes._kopf import kopf_runs, releases, requeue, stock_kinds, translation
from kopf_outcomes._kopf.concluding import conclude, tell
from kopf_outcomes._kopf.cycle import EMPTY, KEYS, RETAINED_ONLY, Cycle, current, is_parked, of, record_of
from kopf_outcomes._kopf.internals import (
    CHANGE,
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
    no_extra_context,
    raw_body_of,
)
from kopf_outcomes._kopf.kopf_runs import build, option
from kopf_outcomes._kopf.marks import Held
from kopf_outcomes._kopf.retentions import holds_retained_child, kopf_retains_any
from kopf_outcomes.finalizer import fault
from kopf_outcomes.kinds import STOCK
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.options import UnreadOptions, declared
from kopf_outcomes.outcomes import Fatal, Outcome, Pending
from kopf_outcomes.runs import HandlerRun

# Set by Runs.through for the call of a tool's wrapper: our entry says there that it was reached.
_reached: contextvars.ContextVar[list[bool] | None] = contextvars.ContextVar("kopf_outcomes_reached", default=None)

_INVOKE_PARAMETERS = ("handler", "cause", "retry", "started", "runtime", "settings", "lifecycle", "subrefs",
                      "extra_context")


class Decided(BaseException):
    """Carries a decided outcome past Kopf's own ``except Exception`` handling, unlogged."""

    def __init__(self, outcome: Outcome, run: HandlerRun, subrefs: Collection[HandlerId]) -> None:
        super().__init__(outcome)
        self.outcome = outcome
        self.run = run
        self.subrefs = subrefs  # the sub-handlers it ran, for Kopf to purge their states later


class Runs:
    """The steps of one handler run, around Kopf's own ``execute_handler_once`` (``kopf_execute``)."""

    def __init__(self, plugins: PluginManager, invoke_handler: Callable[..., Any],
                 execute_handler_once: Callable[..., Any]) -> None:
        self.plugins = plugins
        self.kopf_invoke = invoke_handler
        self.kopf_execute = execute_handler_once
        # Kopf 1.37-1.45's parameters of invoke_handler, which :meth:`invoke_handler` names.
        self.plain_invoke = tuple(inspect.signature(invoke_handler).parameters) == _INVOKE_PARAMETERS

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
        """Kopf's ``execute_handler_once`` entered directly (a cycle runs the same steps inline)."""
        reached = _reached.get()
        if reached is not None:
            reached.append(True)
        cycle = current()  # None without a cycle: made only where a step needs it
        if state.message is not None:  # a retained handler carries its mark in Kopf's message
            released = self.begin(cycle, settings, handler, cause, state)
            if released is not None:
                return released
        # The caller's errors mode, for plugins that read arbitrary exceptions as Kopf would.
        errors = None if self.plugins.decides_builtin else kopf_runs.default_errors.set(default_errors)
        try:
            outcome = await self.kopf_execute(settings=settings, handler=handler, cause=cause, state=state,
                                              lifecycle=lifecycle, extra_context=extra_context,
                                              default_errors=default_errors)
        except Decided as decided:
            return self.decided(of(settings, cause, handler), handler, cause, state, decided)
        finally:
            if errors is not None:
                kopf_runs.default_errors.reset(errors)
        return self.concluded(cycle, settings, handler, cause, state, outcome)

    async def through(self, wrapper: Callable[..., Any], cycle: Cycle, settings: OperatorSettings, handler: Handler,
                      cause: Cause, state: HandlerState, lifecycle: LifeCycleFn | None, extra_context: ExtraContext,
                      default_errors: ErrorsMode) -> KopfOutcome:
        """Kopf's run through a tool's wrapper of ``execute_handler_once`` put in after us, which
        reaches :meth:`execute_handler_once`. A wrapper of Kopf's own function (taken before
        ``install()``) never does: the run's outcome is then carried out here, as that entry would
        (never Kopf's final outcome unguarded: its faults hold, a retain retains)."""
        reached: list[bool] = []
        token = _reached.set(reached)
        try:
            outcome: KopfOutcome = await wrapper(settings=settings, handler=handler, cause=cause, state=state,
                                                 lifecycle=lifecycle, extra_context=extra_context,
                                                 default_errors=default_errors)
        except Decided as decided:  # our entry catches its own: this run went past it
            return self.decided(cycle, handler, cause, state, decided)
        finally:
            _reached.reset(token)
        return outcome if reached else self.concluded(cycle, settings, handler, cause, state, outcome)

    # 1. Before Kopf's run.

    def begin(self, cycle: Cycle | None, settings: OperatorSettings, handler: Handler, cause: Cause,
              state: HandlerState) -> KopfOutcome | None:
        """A retained handler released by a person, concluded without running it; None: it runs."""
        if not is_parked(state, RETAINED_ONLY):  # only a retained one is released
            return None
        return releases.released(self.plugins, cycle or of(settings, cause, handler), handler, cause, state, settings)

    # 2. Inside Kopf's run.

    async def invoke_handler(self, *, handler: Handler, cause: Cause, retry: int, started: datetime.datetime,
                             runtime: datetime.timedelta, settings: OperatorSettings, lifecycle: LifeCycleFn | None,
                             subrefs: set[HandlerId], extra_context: ExtraContext) -> Any:
        """Kopf's ``invoke_handler``: the handler's result or exception read through the plugins.
        Where they say "stock", the run goes on in Kopf untouched: that is stock parity."""
        cycle = current()
        if cycle is not None:
            if not cycle.persists and cycle.kind in STOCK:  # as decided for the cycle (reaction.Reactions)
                return await stock_kinds.invoke(self.kopf_invoke, dict(
                    handler=handler, cause=cause, retry=retry, started=started, runtime=runtime, settings=settings,
                    lifecycle=lifecycle, subrefs=subrefs, extra_context=extra_context))
            if cycle.records:  # quiet rechecks are attempts too (docs/outcomes.md)
                retry += requeue.quiet_attempts(cycle.records.get(str(handler.id)), _now())
        plugins = self.plugins
        try:
            result = await self.kopf_invoke(
                handler=handler, cause=cause, retry=retry, started=started, runtime=runtime, settings=settings,
                lifecycle=lifecycle, subrefs=subrefs, extra_context=extra_context)
        except HandlerChildrenRetry:
            raise  # Kopf's own sub-handler bookkeeping, not the handler's verdict
        except Exception as e:
            if plugins.decides_builtin and not isinstance(e, Outcome):
                raise
            self.decide(handler, cause, retry, runtime, settings, subrefs, exception=e)
            raise
        if plugins.decides_builtin and not isinstance(result, Outcome) and not (
                (declared or plugins.provides_options) and option(plugins, handler, cause, "explicit_completion")):
            return result
        self.decide(handler, cause, retry, runtime, settings, subrefs, result=result)
        return result

    async def invoke_handler_any(self, **kwargs: Any) -> Any:
        """:meth:`invoke_handler` for a Kopf whose ``invoke_handler`` has other parameters (a newer
        one, opted in): Kopf's arguments passed on as they come, the same steps."""
        handler: Handler = kwargs["handler"]
        cycle = current()
        if cycle is not None:
            if not cycle.persists and cycle.kind in STOCK:
                return await stock_kinds.invoke(self.kopf_invoke, kwargs)
            if cycle.records:
                kwargs["retry"] = kwargs["retry"] + requeue.quiet_attempts(cycle.records.get(str(handler.id)), _now())
        plugins = self.plugins
        try:
            result = await self.kopf_invoke(**kwargs)
        except HandlerChildrenRetry:
            raise
        except Exception as e:
            if plugins.decides_builtin and not isinstance(e, Outcome):
                raise
            self.decide(handler, kwargs["cause"], kwargs["retry"], kwargs["runtime"], kwargs["settings"],
                        kwargs["subrefs"], exception=e)
            raise
        if plugins.decides_builtin and not isinstance(result, Outcome) and not (
                (declared or plugins.provides_options) and option(plugins, handler, kwargs["cause"],
                                                                  "explicit_completion")):
            return result
        self.decide(handler, kwargs["cause"], kwargs["retry"], kwargs["runtime"], kwargs["settings"],
                    kwargs["subrefs"], result=result)
        return result

    def decide(self, handler: Handler, cause: Cause, retry: int, runtime: datetime.timedelta,
               settings: OperatorSettings, subrefs: Collection[HandlerId], *, result: object = None,
               exception: Exception | None = None) -> None:
        """Raise :class:`Decided` where the plugins decide the run; return where it stays Kopf's."""
        cycle = of(settings, cause, handler)
        run = build(self.plugins, cycle.kind, handler, cause, retry, runtime.total_seconds(), settings,
                    cycle.records.get(str(handler.id)), cycle)
        outcome = engine.decide(self.plugins, run, result=result, exception=exception)
        if outcome is not None:
            raise Decided(outcome, run, subrefs) from exception

    # 3. After Kopf's run.

    def decided(self, cycle: Cycle, handler: Handler, cause: Cause, state: HandlerState,
                decided: Decided) -> KopfOutcome:
        """Our outcome, decided inside the run, carried out in Kopf's terms."""
        turn = translation.Turn(self.plugins, cycle, decided.run, handler, cause, state)
        return self.carried_out(turn, decided.outcome, decided.subrefs)

    def carried_out(self, turn: translation.Turn, outcome: Outcome, subrefs: Collection[HandlerId]) -> KopfOutcome:
        """The outcome as carried out (a hold where a fault is found), in Kopf's terms, kept and told."""
        outcome = translation.effective(turn, outcome)
        return conclude(turn, outcome, translation.realize(turn, outcome, subrefs))

    def concluded(self, cycle: Cycle | None, settings: OperatorSettings, handler: Handler, cause: Cause,
                  state: HandlerState, outcome: KopfOutcome) -> KopfOutcome:
        """Stock Kopf decided. Its final failures pass the finalizer guard; sub-handlers that wait
        for us make their parent wait with them; the memory is kept right, observers told."""
        plugins = self.plugins
        if outcome.final and plugins.provides_options:  # a conclusion that may release: its faults hold
            held = self.held(cycle, settings, handler, cause, state, outcome)
            if held is not None:
                return held
        if outcome.exception is not None:
            waited = self.unstocked(cycle or of(settings, cause, handler), handler, cause, state, settings, outcome)
            if waited is not None:
                return waited
            if isinstance(outcome.exception, HandlerChildrenRetry):
                return outcome  # Kopf's bookkeeping of its children, not a verdict to remember or tell
        remember = (declared or plugins.provides_options) and option(plugins, handler, cause, "remember")
        remembered = str(handler.id) in cycle.records if cycle is not None else has_memory(settings, cause)
        recalled = cycle is not None and str(handler.id) in cycle.recalled  # its key given out: kept on a failure
        if not remember and not remembered and not recalled:
            if not plugins.observed:
                return outcome  # nothing remembered before or now, nobody to tell: stock Kopf's run
            kind = CHANGE if cycle is None else cycle.kind  # a run that no cycle started is told as a change's
            run = build(plugins, kind, handler, cause, state.retries, state, settings, None, cycle)
            return tell(plugins, kind, KEYS[settings.persistence.finalizer] if cycle is None else cycle.keys, run,
                        handler, cause, translation.from_kopf(outcome), outcome)
        cycle = cycle or of(settings, cause, handler)
        record = record_of(cycle, str(handler.id), state)
        if record is None and not remember and not plugins.observed and not recalled:
            return outcome
        return conclude(translation.turn_of(plugins, cycle, handler, cause, state, settings, record),
                        translation.from_kopf(outcome), outcome)

    def held(self, cycle: Cycle | None, settings: OperatorSettings, handler: Handler, cause: Cause,
             state: HandlerState, outcome: KopfOutcome) -> KopfOutcome | None:
        """Kopf's final outcome, held where the release decision finds a fault (the handler's
        options could not be read: :func:`kopf_outcomes.finalizer.fault`); None: it stands."""
        options = kopf_runs.options_of(self.plugins, handler, cause)
        if options.__class__ is not UnreadOptions:
            return None
        cycle = cycle or of(settings, cause, handler)
        turn = translation.turn_of(self.plugins, cycle, handler, cause, state, settings,
                                   record_of(cycle, str(handler.id), state))
        if fault(cycle.kind, turn.run.reason, options) is None:
            return None
        return self.carried_out(turn, translation.from_kopf(outcome), outcome.subrefs)

    def unstocked(self, cycle: Cycle, handler: Handler, cause: Cause, state: HandlerState,
                  settings: OperatorSettings, outcome: KopfOutcome) -> KopfOutcome | None:
        """Kopf's own outcome where it is ours to realize: a parent whose unfinished sub-handlers
        all wait for us (Pending or retained) waits with them; a final failure that the finalizer
        guard retains. None: Kopf's outcome stands."""
        if not cycle.persists:
            return None
        handler_id = str(handler.id)
        if isinstance(outcome.exception, HandlerChildrenRetry):
            waiting = cycle.own_children().pop(handler_id, None) if handler_id in cycle.children else None
            if waiting is None:
                return None  # the children are Kopf's: Kopf's retry of them stands
            if isinstance(waiting, Held):  # Kopf retries held children only: the parent's retry is held too
                return dataclasses.replace(outcome, exception=waiting, delay=waiting.delay)
            if not isinstance(waiting, Pending):  # some are Kopf's: its retry, when the first is due
                return dataclasses.replace(outcome, delay=waiting)
            turn = translation.turn_of(self.plugins, cycle, handler, cause, state, settings,
                                       record_of(cycle, handler_id, state))
            return self.carried_out(turn, waiting, outcome.subrefs)
        if not outcome.final:
            return None
        # A parent ending for good (its retries= or timeout=) must not release what a child retains: by
        # the memory, or by Kopf's progress of its sub-handlers where the memory has none of them.
        held = holds_retained_child(cycle, handler_id) or kopf_retains_any(
            cycle, cause, [sub for sub in (*state.subrefs, *outcome.subrefs) if str(sub) not in cycle.records])
        if not held and option(self.plugins, handler, cause, "fatal_on_delete") != "retain":
            return None
        turn = translation.turn_of(self.plugins, cycle, handler, cause, state, settings,
                                   record_of(cycle, handler_id, state))
        reason = str(outcome.exception) or repr(outcome.exception)
        retained = translation.guard(turn, reason, on_delete="retain" if held else None)
        if retained is None:
            return None  # the rule releases it: Kopf's failure stands
        # Told to the observers as a retained Fatal.
        return conclude(turn, Fatal(reason, on_delete="retain"), dataclasses.replace(retained, subrefs=outcome.subrefs))


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def has_memory(settings: OperatorSettings, cause: Cause) -> bool:
    """Whether the object has a memory of ours at all (outside of a cycle, nothing has read it)."""
    body = raw_body_of(cause)
    annotations = ((body or EMPTY).get("metadata") or EMPTY).get("annotations")
    return annotations is not None and KEYS[settings.persistence.finalizer].memory in annotations
