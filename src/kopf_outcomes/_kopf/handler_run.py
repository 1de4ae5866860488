"""
One handler run, top to bottom: before Kopf's ``execute_handler_once``, a retained finalizer
released by its annotation (:meth:`Runs.released`); inside it, Kopf's ``invoke_handler`` read
through the plugins (:meth:`Runs.invoke_handler`: an outcome is decided before Kopf logs the
handler's result or error, and carried out as :class:`Decided`); after it, our outcome realized
(:meth:`Runs.decided`) or Kopf's concluded (:meth:`Runs.concluded`): kept in the memory, told to
the observers. Both go on in :mod:`.translation`.

A reaction cycle (:mod:`.reaction`) calls Kopf's own ``execute_handler_once`` between these steps,
with no coroutine of ours around it (each costs every run its frame); :meth:`Runs.execute_handler_once`
is the same steps for callers of Kopf's internals that enter it outside of a cycle.
"""
from __future__ import annotations

import dataclasses
import datetime
import inspect
from collections.abc import Callable, Collection, Mapping
from typing import Any

from kopf_outcomes import engine, memory
from kopf_outcomes._kopf import kopf_runs, requeue, stock_kinds, translation
from kopf_outcomes._kopf.cycle import (
    EMPTY,
    KEYS,
    RETAINED_ONLY,
    Cycle,
    current,
    holds_retained_child,
    is_parked,
    of,
    record_of,
    release_stands,
    released_children,
)
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
)
from kopf_outcomes._kopf.kopf_runs import body_of, build, option
from kopf_outcomes._kopf.marks import Held
from kopf_outcomes.finalizer import fault
from kopf_outcomes.kinds import STOCK
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.memory import MemoryRecord
from kopf_outcomes.options import UnreadOptions, declared
from kopf_outcomes.outcomes import Outcome, Pending
from kopf_outcomes.runs import HandlerRun

# Kopf's invoke_handler's parameters (keyword-only), the same from Kopf 1.37 to 1.45.
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
        # Kopf's own parameters, named one by one: a ``**kwargs`` wrapper gathers a dict on every run.
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
        """Kopf's ``execute_handler_once`` entered directly (the cycle runs the same steps inline)."""
        cycle = current()  # None without a cycle: made only when needed
        if state.message is not None and is_parked(state, RETAINED_ONLY):  # only a retained one is released
            cycle = of(settings, cause, handler)
            released = self.released(cycle, handler, cause, state, settings)
            if released is not None:
                return released
        # Only plugins need the caller's errors mode (to read arbitrary exceptions as Kopf would).
        errors = None if self.plugins.decides_builtin else kopf_runs.default_errors.set(default_errors)
        try:
            # By position (Kopf's order of its parameters): keywords cost every run their matching.
            outcome = await self.kopf_execute(settings, handler, cause, state, lifecycle, extra_context,
                                              default_errors)
        except Decided as decided:
            return self.decided(of(settings, cause, handler), handler, cause, state, decided)
        finally:
            if errors is not None:
                kopf_runs.default_errors.reset(errors)
        return self.concluded(cycle, settings, handler, cause, state, outcome)

    async def invoke_handler(self, *, handler: Handler, cause: Cause, retry: int, started: datetime.datetime,
                             runtime: datetime.timedelta, settings: OperatorSettings, lifecycle: LifeCycleFn | None,
                             subrefs: set[HandlerId], extra_context: ExtraContext) -> Any:
        """Kopf's ``invoke_handler``: the handler's result or exception read through the plugins. When
        they say "stock", the run goes on in Kopf untouched: that is stock parity. A Kopf with other
        parameters gets :meth:`invoke_handler_any` instead."""
        cycle = current()
        if cycle is not None:
            if not cycle.persists and cycle.kind in STOCK:  # as decided for the cycle (reaction.Reactions)
                return await stock_kinds.invoke(self.kopf_invoke, dict(
                    handler=handler, cause=cause, retry=retry, started=started, runtime=runtime, settings=settings,
                    lifecycle=lifecycle, subrefs=subrefs, extra_context=extra_context))
            if cycle.records:  # quiet rechecks are attempts too (docs/outcomes.md)
                record = cycle.records.get(str(handler.id))
                if record is not None and record.get("recheck"):
                    retry += requeue.quiet_attempts(record, datetime.datetime.now(datetime.timezone.utc))
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
        if plugins.decides_builtin and not isinstance(result, Outcome):
            if not (declared or plugins.provides_options) or not option(
                    plugins, handler, cause, "explicit_completion"):  # its gate, inline
                return result
        self.decide(handler, cause, retry, runtime, settings, subrefs, result=result)
        return result

    async def invoke_handler_any(self, **kwargs: Any) -> Any:
        """:meth:`invoke_handler` for a Kopf whose ``invoke_handler`` has other parameters:
        Kopf's arguments passed on as they are."""
        handler: Handler = kwargs["handler"]
        cycle = current()
        if cycle is not None:
            if not cycle.persists and cycle.kind in STOCK:
                return await stock_kinds.invoke(self.kopf_invoke, kwargs)
            if cycle.records:  # quiet rechecks are attempts too (docs/outcomes.md)
                record = cycle.records.get(str(handler.id))
                if record is not None and record.get("recheck"):
                    now = datetime.datetime.now(datetime.timezone.utc)
                    kwargs["retry"] = kwargs["retry"] + requeue.quiet_attempts(record, now)
        try:
            result = await self.kopf_invoke(**kwargs)
        except HandlerChildrenRetry:
            raise
        except Exception as e:
            if self.plugins.decides_builtin and not isinstance(e, Outcome):
                raise
            self.decide(handler, kwargs["cause"], kwargs["retry"], kwargs["runtime"], kwargs["settings"],
                        kwargs["subrefs"], exception=e)
            raise
        if self.plugins.decides_builtin and not isinstance(result, Outcome):
            if not (declared or self.plugins.provides_options) or not option(
                    self.plugins, handler, kwargs["cause"], "explicit_completion"):
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

    def released(self, cycle: Cycle, handler: Handler, cause: Cause, state: HandlerState,
                 settings: OperatorSettings) -> KopfOutcome | None:
        """A retained finalizer, released by the annotation a person set (the wake-up checked it);
        None where the handler is not retained (its progress carries the retained mark: checked first)."""
        record, body = record_of(cycle, str(handler.id), state), body_of(cause)
        if record is None or record["outcome"] != "retained" or body is None:
            return None
        turn = self.turn(cycle, handler, cause, state, settings, record)
        if not release_stands(cycle, str(handler.id), body, record):  # withdrawn while its retry waited
            return translation.still_retained(turn, record)
        if not memory.release_answers(body, str(handler.id), record, cycle.keys):  # released through children
            for child_id, child_record in released_children(cycle, str(handler.id), body).items():
                child = dataclasses.replace(handler, id=HandlerId(child_id))  # its parent's run is not running it
                concluded = translation.release(self.turn(cycle, child, cause, state, settings, child_record),
                                                child_record)
                deadline = getattr(concluded.exception, "deadline", None)
                if deadline is not None:  # an observer failed on the child's release: both wait for its retry
                    return translation.release_retried(turn, record, deadline)
        return translation.release(turn, record)

    def decided(self, cycle: Cycle, handler: Handler, cause: Cause, state: HandlerState,
                decided: Decided) -> KopfOutcome:
        """Our outcome, decided inside the run, in Kopf's terms."""
        turn = tuple.__new__(translation.Turn, (self.plugins, cycle, decided.run, handler, cause, state))
        return translation.realize(turn, decided.outcome, decided.subrefs)

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
        # option's gate, inline: this is every run's path.
        remember = (declared or plugins.provides_options) and option(plugins, handler, cause, "remember")
        if cycle is not None:
            remembered = bool(cycle.records) and str(handler.id) in cycle.records
        else:  # outside of a cycle, nothing has read the memory: is it there at all? (inline: every run)
            body = getattr(cause, "body", None)
            raw = getattr(body, "_src", None)  # internals.raw_body_of
            annotations: Mapping[str, Any] | None = (
                (raw if raw.__class__ is dict else body or EMPTY).get("metadata") or EMPTY).get("annotations")
            keys = KEYS[settings.persistence.finalizer]
            remembered = annotations is not None and keys.memory in annotations
        recalled = cycle is not None and str(handler.id) in cycle.recalled  # its key given out: kept on a failure
        if not remember and not remembered and not recalled:
            if not plugins.observed:
                return outcome  # the hot path: nothing remembered before or now, nobody to tell
            # A run that no cycle started is told as a change's.
            kind = CHANGE if cycle is None else cycle.kind
            run = build(plugins, kind, handler, cause, state.retries, state, settings, None, cycle)
            return translation.tell(plugins, kind, keys if cycle is None else cycle.keys, run, handler, cause,
                                    translation.from_kopf(outcome), outcome)
        cycle = cycle or of(settings, cause, handler)
        record = record_of(cycle, str(handler.id), state)
        if record is None and not remember and not plugins.observed and not recalled:
            return outcome
        return translation.conclude(self.turn(cycle, handler, cause, state, settings, record),
                                    translation.from_kopf(outcome), outcome)

    def held(self, cycle: Cycle | None, settings: OperatorSettings, handler: Handler, cause: Cause,
             state: HandlerState, outcome: KopfOutcome) -> KopfOutcome | None:
        """Kopf's final outcome, held where the release decision finds a fault (the handler's
        options could not be read: :func:`kopf_outcomes.finalizer.fault`); None: it stands."""
        options = kopf_runs.options_of(self.plugins, handler, cause)
        if options.__class__ is not UnreadOptions:
            return None
        cycle = cycle or of(settings, cause, handler)
        turn = self.turn(cycle, handler, cause, state, settings, record_of(cycle, str(handler.id), state))
        if fault(cycle.kind, turn.run.reason, options) is None:
            return None
        return translation.realize(turn, translation.from_kopf(outcome), outcome.subrefs)

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
            turn = self.turn(cycle, handler, cause, state, settings, record_of(cycle, handler_id, state))
            return translation.realize(turn, waiting, outcome.subrefs)
        if not outcome.final:
            return None
        # A parent ending for good (its retries= or timeout=) must not release what a child retains.
        held = holds_retained_child(cycle, handler_id)
        if not held and option(self.plugins, handler, cause, "fatal_on_delete") != "retain":
            return None
        turn = self.turn(cycle, handler, cause, state, settings, record_of(cycle, handler_id, state))
        return translation.retain_stock(turn, outcome, on_delete="retain" if held else None)

    def turn(self, cycle: Cycle, handler: Handler, cause: Cause, state: HandlerState,
             settings: OperatorSettings, record: MemoryRecord | None) -> translation.Turn:
        """The run, as concluding it after Kopf's ``execute_handler_once`` needs it."""
        run = build(self.plugins, cycle.kind, handler, cause, state.retries, state, settings, record, cycle)
        return tuple.__new__(translation.Turn, (self.plugins, cycle, run, handler, cause, state))
