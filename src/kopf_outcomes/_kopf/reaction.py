"""
One reaction cycle of one object: Kopf's ``execute_handlers_once``, with its selection of awakened
handlers, plus the parked ones whose state changed (:func:`select`), each run with the steps of
:mod:`.handler_run` around Kopf's own ``execute_handler_once``; then which of Kopf's delays are
ours (:func:`ours`), and, for sub-handlers, what their parent waits for (:mod:`.children`).

Most cycles are of objects with no memory of ours: :func:`select` takes them through a loop of their
own, with no schedule of ours to read (1,400 instructions, 0.3 % of a cycle, kept with
:mod:`.cycle`'s making for the per-cycle hold line: see its docstring), and the handler's errors
mode is set inline (a method's call more on every run).
"""
from __future__ import annotations

import datetime
import functools
from collections.abc import Callable, Collection, Mapping, Sequence

from kopf_outcomes import objects
from kopf_outcomes._kopf import children, deadlines, delays, dependents, kopf_runs, requeue, stock_kinds
from kopf_outcomes._kopf.cycle import (
    EMPTY,
    RETAINED_ONLY,
    Cycle,
    current,
    end,
    enter,
    is_held,
    is_parked,
    make,
    record_of,
)
from kopf_outcomes._kopf.handler_run import Decided, Runs
from kopf_outcomes._kopf.internals import (
    CHANGE,
    SUBHANDLER,
    Cause,
    ErrorsMode,
    ExtraContext,
    Handler,
    HandlerId,
    HandlerState,
    KopfOutcome,
    LifeCycleFn,
    OperatorSettings,
    State,
    afresh,
    execution,
    handler_var,
    no_extra_context,
    operator_writes,
    progress_of,
    raw_body_of,
    unheld,
    with_outcomes,
)
from kopf_outcomes._kopf.marks import Parked, Rechecking
from kopf_outcomes._kopf.own_writes import OwnWrites
from kopf_outcomes._kopf.refreshing import discard_unreadable, prune, refresh, track
from kopf_outcomes._kopf.retentions import child_release_retried
from kopf_outcomes._kopf.waiting import observe_object, recheck_wait, wakes
from kopf_outcomes.kinds import STOCK
from kopf_outcomes.manager import PluginManager

OWN_WRITE_WAIT = 5.0  # seconds: Kopf's default consistency_timeout, where its settings have none


class Reactions:
    """The cycles of one installation; ``entry`` is its ``execute_handler_once`` as put into Kopf."""

    def __init__(self, plugins: PluginManager, runs: Runs, entry: Callable[..., object],
                 own_writes: OwnWrites | None = None) -> None:
        self.plugins = plugins
        self.runs = runs
        self.entry = entry
        self.own_writes = own_writes if own_writes is not None else OwnWrites()

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
        cycle = make(settings, cause, handlers, state)
        if not cycle.persists and cycle.kind in STOCK:  # the one place where a kind is left to stock Kopf
            return await stock_kinds.handlers_once(self.runs.kopf_execute, cycle, lifecycle, settings, handlers,
                                                   cause, state, extra_context, default_errors)
        # Only a change cycle is held: a sub-handler runs inside its change handler's cycle, and a
        # timer or daemon keeps no memory (held, it gets no delay: Kopf calls it again at once, a spin).
        if cycle.kind is CHANGE and self.own_writes.older(raw_body_of(cause) or EMPTY, listed=requeue.listed()):
            # Kopf purged its progress from this view where it shows another purpose's (unknown: so it did).
            purged = operator_writes(settings) if getattr(state, "extras", True) else None
            self.own_writes.hold(getattr(cause, "patch", None), purged=purged)
            return older_than_own_write(settings, handlers, cause, state)
        parent = current() if cycle.kind is SUBHANDLER else None  # the change handler's cycle
        token = enter(cycle)
        try:
            # Handlers whose other objects are unknown (dependents.take says why) do not run: ours to hold.
            unknown: Mapping[str, float | None] = EMPTY  # (read only)
            if objects.declared:
                taken, unknown = dependents.take(cycle.kind, handlers, cause)
                cycle.objects = taken
            if self.plugins.observes_objects and cycle.kind is CHANGE:
                observe_object(self.plugins, cycle, handlers, cause, state)
            todo, woken, waiting, waits = select(self.plugins, cycle, handlers, cause, state, unknown)
            for handler in woken:  # woken again after it finished: a new run of it (its own retries=)
                if progress_of(state, handler).finished:
                    afresh(state, handler)
            runs, outcomes = self.runs, {}
            marked = bool(waiting)  # whether a delay may be ours: one waits, or a run ended otherwise than well
            for handler in lifecycle(todo, state=state, **cause.kwargs):
                handler_state: HandlerState = state[handler.id]  # type: ignore[assignment]
                # A hold (a fault; a child's release retried) is not the handler's: it spent none of its
                # retries= and timeout= (a retained handler is no hold), whoever calls Kopf's run below.
                if handler_state.message is not None and not is_parked(handler_state, RETAINED_ONLY) and (
                        is_held(handler_state) or (is_parked(handler_state) and child_release_retried(
                            cycle, str(handler.id), raw_body_of(cause) or EMPTY))):
                    handler_state = unheld(state, handler)
                if execution.execute_handler_once is not self.entry:  # wrapped after us (a tool's): through it
                    marked = True
                    outcomes[handler.id] = await runs.through(execution.execute_handler_once, cycle, settings, handler,
                                                              cause, handler_state, lifecycle, extra_context,
                                                              default_errors)
                    continue
                # The steps of Runs.execute_handler_once, with no coroutine of ours around Kopf's (handler_run).
                released = runs.begin(cycle, settings, handler, cause, handler_state) \
                    if handler_state.message is not None else None  # a retained handler's mark is in it
                if released is not None:
                    marked = True
                    outcomes[handler.id] = released
                    continue
                errors = None if self.plugins.decides_builtin else kopf_runs.default_errors.set(default_errors)
                try:
                    outcome = await runs.kopf_execute(settings=settings, handler=handler, cause=cause,
                                                      state=handler_state, lifecycle=lifecycle,
                                                      extra_context=extra_context, default_errors=default_errors)
                except Decided as decided:
                    marked = True
                    outcomes[handler.id] = runs.decided(cycle, handler, cause, handler_state, decided)
                    continue
                finally:
                    if errors is not None:
                        kopf_runs.default_errors.reset(errors)
                outcomes[handler.id] = outcome = runs.concluded(cycle, settings, handler, cause, handler_state, outcome)
                marked = marked or outcome.exception is not None
            # A woken handler not planned now (the lifecycle runs one at a time; one that had finished
            # is started anew above, so the cause does not end before it re-runs): the next cycle runs
            # it, at once and without a write (the one planned may conclude quietly: no event).
            for handler in woken:
                if handler.id not in outcomes:
                    waits = [*waits, 0.0]
            found = None
            if marked:
                found, waiting, waits = ours(cycle, outcomes, waiting, waits)
            if parent is not None:  # sub-handlers: the parent's run decides the delays
                waited = children.waiting(handlers, state, outcomes, waiting, cycle.records, waits, unknown)
                if waited is not None:
                    parent.own_children()[str(handler_var.get().id)] = waited
                track(cycle, handlers)
                if cycle.tracked:
                    parent.own_tracked().update(cycle.tracked)
                return outcomes
            if cycle.unreadable and outcomes:
                discard_unreadable(cycle, cause)
            if cycle.records or cycle.tracked:
                track(cycle, handlers)
                refresh(self.plugins, cycle, cause)
                prune(cycle, cause)
            # Which of Kopf's delays are ours (parked, rechecking); none where nothing is ours: a
            # parked handler has a memory, or lost it and was woken to conclude afresh.
            if cycle.persists and (cycle.records or found or woken):
                found = found if found is not None else set()
                found.update(str(h.id) for h in handlers
                             if h.id not in outcomes and is_parked(progress_of(state, h)))
                final = with_outcomes(state, outcomes) if found else state
                wake = dependents.wake_keys(cycle.objects, handlers, cycle.records, found, cause) \
                    if cycle.objects else ()
                delays.tell(getattr(cause, "patch", None), final, found, waits, wake,
                            functools.partial(dependents.changed, cycle.objects, handlers, cause) if wake else None)
            return outcomes
        finally:
            end(token)


def older_than_own_write(settings: OperatorSettings, handlers: Collection[Handler], cause: Cause,
                         state: State) -> Mapping[HandlerId, KopfOutcome]:
    """A view older than this process's own last memory write of the object (:mod:`.own_writes`):
    none of its change handlers runs, what the cycle adds to the patch is dropped (``OwnWrites.hold``),
    so nothing of it is written, nor the finalizer removed; the cycle runs again on the object's
    latest event after Kopf's own wait for its write (``consistency_timeout``), at once when a new
    event comes."""
    timeout = getattr(settings.persistence, "consistency_timeout", None)
    wait = float(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else OWN_WRITE_WAIT
    delays.tell(getattr(cause, "patch", None), state, {str(h.id) for h in handlers}, [wait])
    return {}


def select(plugins: PluginManager, cycle: Cycle, handlers: Collection[Handler], cause: Cause, state: State,
           unknown: Mapping[str, float | None]
           ) -> tuple[list[Handler], Sequence[Handler], Sequence[HandlerId], Sequence[float]]:
    """The handlers to run (Kopf's awakened ones, and ours that are due or woken), those woken by
    us, those that wait for us, and the seconds until each of ours is looked at again."""
    todo: list[Handler] = []
    if not cycle.records and not unknown:  # no memory, no schedule of ours (see the module's docstring)
        woke: Sequence[Handler] = ()
        for h in handlers:
            handler_state: HandlerState = state[h.id]  # type: ignore[assignment]  # Kopf's progress of it
            if handler_state.awakened:
                todo.append(h)
            elif wakes(plugins, cycle, h, cause, handler_state):  # parked, its memory lost: it concludes afresh
                todo.append(h)
                woke = [*woke, h]
        return todo, woke, (), ()
    woken: list[Handler] = []
    waiting: list[HandlerId] = []
    waits: list[float] = []
    now = datetime.datetime.now(datetime.timezone.utc) if cycle.records else None
    for h in handlers:
        handler_state = progress_of(state, h)
        wait = None if now is None or handler_state.finished else recheck_wait(plugins, cycle, h, cause, now)
        due = None if now is None or handler_state.finished else deadlines.wait(
            record_of(cycle, str(h.id), handler_state), now)  # a retained record counts only where marked so
        if unknown and str(h.id) in unknown:
            waiting.append(h.id)  # held until its objects are known: no deadline runs it before
            again = unknown[str(h.id)]
            if again is not None:  # looked at again then (a listing under way; a held sub-handler)
                waits.append(again)
            continue
        elif due == 0.0:  # its escalation's deadline has come: it runs, and escalates
            todo.append(h)
            woken.append(h)
            continue
        elif wait is not None and wait > 0:  # rechecking, not due yet (Kopf's stored delay is stale)
            waiting.append(h.id)
            waits.append(wait)
        elif wait is not None or handler_state.awakened:  # due by our schedule, or by Kopf's
            todo.append(h)
            continue
        elif wakes(plugins, cycle, h, cause, handler_state):
            todo.append(h)
            woken.append(h)
            continue
        if due is not None:  # still waiting: it runs at its deadline, without a write before
            waits.append(due + deadlines.MARGIN)
    return todo, woken, waiting, waits


def ours(cycle: Cycle, outcomes: dict[HandlerId, KopfOutcome], waiting: Sequence[HandlerId],
         waits: Sequence[float]) -> tuple[set[str], list[HandlerId], list[float]]:
    """The handlers whose delays are ours (parked, rechecking, waiting), with their waits added;
    those that concluded quietly (nothing new to store) leave ``outcomes`` and wait: Kopf keeps
    its progress. Returns them with ``waiting`` and ``waits``, added to (new lists: select's may be shared)."""
    found = {str(handler_id) for handler_id in waiting} if waiting else set()
    waiting, waits = list(waiting), list(waits)
    for handler_id, outcome in list(outcomes.items()):
        if not isinstance(outcome.exception, (Parked, Rechecking)):
            continue  # Kopf's own
        found.add(str(handler_id))
        if isinstance(outcome.exception, Rechecking):
            requeue.ran(str(handler_id))
            waits.append(next_recheck(cycle, str(handler_id), outcome))
        due = deadlines.until(outcome.exception.deadline, datetime.datetime.now(datetime.timezone.utc))
        if due is not None:
            waits.append(due + deadlines.MARGIN)
        if str(handler_id) in cycle.quiet:
            del outcomes[handler_id]
            waiting.append(handler_id)
    return found, waiting, waits


def next_recheck(cycle: Cycle, handler_id: str, outcome: KopfOutcome) -> float:
    """Seconds to the next point of the grid of a recheck that ran now (not a full interval from
    now: that drifted by each cycle's own time); a new conclusion starts its grid now."""
    record = cycle.records.get(handler_id)
    if handler_id in cycle.quiet and record is not None:
        now = datetime.datetime.now(datetime.timezone.utc)
        due = requeue.next_due(record, now, after=True, served=True)
        if due is not None:
            return max(0.0, (due - now).total_seconds())
    return outcome.delay or 0.0
