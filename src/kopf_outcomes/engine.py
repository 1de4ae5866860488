"""
Deciding an outcome: classification, adjustment and observation through the plugins.

This module knows nothing of Kopf's internals; the Kopf boundary (:mod:`kopf_outcomes._kopf`)
feeds it runs and turns its decisions into what Kopf does next. Every hook is called here and
contained here: a plugin that raises anything (``SystemExit`` and ``CancelledError`` too: a
synchronous hook cannot be cancelled by the loop, so whatever it raises is its own fault) is
named in the log and the run falls back to the safe side.
"""
from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Collection, Mapping, MutableMapping
from typing import Any, NamedTuple, TypeVar

from kopf_outcomes import answers, builtin, paths
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.options import NO_OPTIONS, HandlerOptions, UnreadOptions, attached_options, unread
from kopf_outcomes.outcomes import Outcome, Retry
from kopf_outcomes.runs import Decision, HandlerRun, ResourceRef

T = TypeVar("T")


def decide(plugins: PluginManager, run: HandlerRun, *, result: object = None,
           exception: BaseException | None = None) -> Outcome | None:
    """
    The outcome of a run, or None to leave the run to stock Kopf as it is.

    A plugin that fails is contained: the run becomes a Retry at ERROR (finalizer kept).
    """
    if plugins.decides_builtin:  # the hot path: no pluggy round-trips for nothing
        reading = builtin.stock_reading(run, result=result, exception=exception)
        return None if reading.stock else reading.outcome
    origin = exception if exception is not None else result
    hook_name: str | None = None  # the hook being called: the one named if it blocks the loop
    started = time.monotonic()
    try:
        if isinstance(origin, Outcome):  # the handler's own decision: nothing to classify
            outcome = origin
        elif exception is None:
            hook_name = "kopf_outcomes_classify_result"
            outcome = plugins.classify_result_by_plugins(run=run, result=result)
            _check(plugins, outcome, hook_name, run=run, result=result)
        else:
            hook_name = "kopf_outcomes_classify_exception"
            outcome = plugins.classify_exception_by_plugins(run=run, exception=exception)
            _check(plugins, outcome, hook_name, run=run, exception=exception)
        if hook_name is not None:
            started = _timed(plugins, run, hook_name, started)
        stock = None
        if outcome is None:
            outcome, is_stock = builtin.stock_reading(run, result=result, exception=exception)
            stock = outcome if is_stock else None
        decision = Decision(outcome=outcome, origin=origin, stock_reading=stock)
        hook_name = "kopf_outcomes_adjust_outcome"
        plugins.hook.kopf_outcomes_adjust_outcome(run=run, decision=decision)
        _check(plugins, decision.outcome, hook_name, optional=False)
    except BaseException as e:  # noqa: B036 -- see the module's docstring
        return contained(plugins, run, e)
    finally:
        if hook_name is not None:
            _timed(plugins, run, hook_name, started)
    return None if decision.stock else decision.outcome


def observe(plugins: PluginManager, run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any],
            protected: Collection[str] = ()) -> PluginFailure | None:
    """
    Tell the observers; return the fallback outcome if one of them failed, else None.

    Observers may add to the patch, but never change ``metadata.finalizers`` or the ``protected``
    annotations (our memory), also not by replacing ``metadata`` or its ``annotations`` with
    something else (``None`` deletes them all in a merge patch), nor change Kopf's patch functions
    (which could change anything): such a change is undone (the patch's ``metadata`` and its patch
    functions put back as they were before the observers), also when the observer then failed, and
    the run falls back to a retry. The usual run (nothing in the patch before or after, and quick)
    costs the observers' call and a few checks around it: it is on every observed run.
    """
    # Kopf's patch functions (1.44+) may change anything. Kopf's Patch keeps them in ``_fns``; older Kopfs have none.
    functions: list[object] = getattr(patch, "_fns", _NO_FUNCTIONS)
    before = _Snapshot.of(patch, protected, functions) if len(patch) or functions else None
    started = time.monotonic()
    try:
        plugins.observe_outcome(run, outcome, patch)
    except BaseException as e:  # noqa: B036
        return _settle(plugins, run, patch, protected, functions, before, started, e)
    if (before is None and not len(patch) and not functions and getattr(patch, "_fns", functions) is functions
            and time.monotonic() - started <= SLOW_HOOK):
        return None  # the usual run: nothing was in the patch, nothing is, and the observers were quick
    return _settle(plugins, run, patch, protected, functions, before, started, None)


def _settle(plugins: PluginManager, run: HandlerRun, patch: MutableMapping[str, Any], protected: Collection[str],
            functions: list[object], before: _Snapshot | None, started: float,
            failure: BaseException | None) -> PluginFailure | None:
    """After the observers, the unusual run: report them if slow, undo what they may not change."""
    if time.monotonic() - started > SLOW_HOOK:
        _report_slow(plugins, run, "kopf_outcomes_observe_outcome", time.monotonic() - started)
    if before is None:  # nothing was in the patch, no patch functions either: undo back to nothing
        before = _Snapshot(_guarded_parts({}, protected), _ABSENT, functions, [], {})
    if before.undo_forbidden(patch, protected) and failure is None:
        names = " or ".join(plugins.implementers("kopf_outcomes_observe_outcome"))
        failure = HookResultError(names, "an observer changed metadata.finalizers or the operator's memory in "
                                         "the patch, or Kopf's patch functions; the change is undone")
    if failure is None:
        return None
    before.undo_all(patch)
    return contained(plugins, run, failure)


_NO_FUNCTIONS: list[object] = []  # a patch without Kopf's patch functions: observers cannot add any


class _Snapshot(NamedTuple):
    """What the patch held before the observers, of what they may not change: the guarded parts,
    its ``metadata`` (a copy, to put back whole), and Kopf's list of patch functions with its items;
    and its other parts (copies), put back where an observer failed."""

    guarded: dict[str, object]
    metadata: object
    functions: list[object]
    items: list[object]
    parts: dict[str, object]

    @classmethod
    def of(cls, patch: Mapping[str, Any], protected: Collection[str], functions: list[object]) -> _Snapshot:
        return cls(_guarded_parts(patch, protected), _kept(patch.get("metadata", _ABSENT)), functions,
                   list(functions), {key: _kept(value) for key, value in patch.items() if key != "metadata"})

    def undo_all(self, patch: MutableMapping[str, Any]) -> None:
        """An observer failed: the run is retried, so what the observers told of did not happen, and
        what any of them wrote goes (a condition saying it did would misreport the object)."""
        for key in [key for key in patch if key != "metadata" and key not in self.parts]:
            del patch[key]
        for key, value in self.parts.items():
            patch[key] = _kept(value)
        self.put_back_metadata(patch)

    def put_back_metadata(self, patch: MutableMapping[str, Any]) -> None:
        if self.metadata is _ABSENT:
            patch.pop("metadata", None)
        else:
            patch["metadata"] = _kept(self.metadata)

    def undo_forbidden(self, patch: MutableMapping[str, Any], protected: Collection[str]) -> bool:
        """Undo what the observers may not change; True if they did. (What they may write is part
        of the state their handler concluded about: the cycle's digest is of the patched object.)"""
        changed = _guarded_parts(patch, protected) != self.guarded
        if changed:  # their other changes of metadata go too: the run is retried anyway
            self.put_back_metadata(patch)
        now = getattr(patch, "_fns", self.functions)
        if now is not self.functions or now != self.items:
            self.functions[:] = self.items
            if now is not self.functions and self.functions is not _NO_FUNCTIONS:
                patch._fns = self.functions  # type: ignore[attr-defined]  # Kopf's list, replaced: put back
            elif now is not self.functions:  # a Kopf without patch functions: none made up, none shared
                vars(patch).pop("_fns", None)
            changed = True
        return changed


SLOW_HOOK = 0.5  # seconds: every other object waits while a hook blocks the event loop


def _timed(plugins: PluginManager, run: HandlerRun, hook_name: str, started: float) -> float:
    """Report the hook if it blocked the loop since ``started``; return the time now."""
    now = time.monotonic()
    if now - started > SLOW_HOOK:
        _report_slow(plugins, run, hook_name, now - started)
    return now


def _report_slow(plugins: PluginManager, run: HandlerRun, hook_name: str, seconds: float) -> None:
    run.logger.warning(f"{hook_name} blocked the event loop for {seconds:.1f}s (plugins: "
                       f"{', '.join(plugins.implementers(hook_name))}); every object waits meanwhile: "
                       f"hooks must be quick.")


_ABSENT = object()


def _guarded_parts(patch: Mapping[str, Any], protected: Collection[str]) -> dict[str, object]:
    """What observers may not change: the finalizers and the protected annotations, as they are; a
    ``metadata`` or ``annotations`` that is there but no mapping stands for itself (never equal)."""
    metadata = patch.get("metadata", _ABSENT)
    if metadata is _ABSENT:
        metadata = {}
    elif not isinstance(metadata, Mapping):
        return {"metadata": object()}
    annotations = metadata.get("annotations", _ABSENT)
    if annotations is _ABSENT:
        annotations = {}
    elif not isinstance(annotations, Mapping):
        return {"annotations": object()}
    parts = {key: annotations.get(key, _ABSENT) for key in protected}
    parts["finalizers"] = _frozen(metadata.get("finalizers", _ABSENT))
    return parts


def _frozen(value: object) -> object:
    """A deep copy, to compare; what cannot be copied stands for itself (never equal)."""
    if value is _ABSENT:
        return value
    try:
        return copy.deepcopy(value)
    except Exception:  # an observer's object that refuses copying  # noqa: BLE001
        return object()


def _kept(metadata: object) -> object:
    """``metadata`` copied two levels deep (its annotations, labels, finalizers), to put back: never
    fails, as Kopf's own writes in it (its finalizer among them) must come back whatever else is there."""
    if not isinstance(metadata, Mapping):
        return metadata
    kept: dict[str, object] = {}
    for key, value in metadata.items():
        try:
            kept[key] = dict(value) if isinstance(value, Mapping) else list(value) if isinstance(value, list) else value
        except Exception:  # noqa: BLE001
            kept[key] = value
    return kept


def options(plugins: PluginManager, fn: object, handler_id: str, resource: ResourceRef | None,
            logger: logging.Logger | logging.LoggerAdapter[Any]) -> HandlerOptions:
    """A handler's own options merged with the plugins'. A failing plugin adds none of its own,
    and only its own are missing: the options are then :class:`UnreadOptions`, which hold a
    deletion's finalizer (:mod:`kopf_outcomes.finalizer`); it is named at ERROR once per cycle."""
    own = attached_options(fn)
    if not plugins.provides_options:  # the hot path: no policy, no options plugin
        return own if own is not None else NO_OPTIONS
    from_plugins = plugins.options(handler_id, resource)
    if isinstance(from_plugins, UnreadOptions):
        if plugins.unread_told.get((handler_id, resource)) is not logger:  # Kopf's logger is the cycle's
            plugins.unread_told[(handler_id, resource)] = logger
            for failure in from_plugins.failures:
                logger.error(f"{failure}; its options are left out (the other plugins' and the policy's "
                             f"apply), and a deletion handler's finalizer is held until it answers. Fix "
                             f"the plugin, or disable it (KOPF_OUTCOMES_DISABLE_PLUGINS).")
        return unread(own.merged(from_plugins), from_plugins.failures) if own is not None else from_plugins
    if plugins.unread_told:
        plugins.unread_told.pop((handler_id, resource), None)
    return own.merged(from_plugins) if own is not None else from_plugins


def owned_fields(plugins: PluginManager,
                 logger: logging.Logger | logging.LoggerAdapter[Any]) -> tuple[tuple[str, ...], ...]:
    """The field paths plugins name as theirs (a failing plugin is logged, and names none; the
    others' stand): the same in every process, so digests compare across restarts. What observers
    write unnamed in a cycle is in the digest remembered by that cycle (of the object as patched)."""
    failures: list[str] = []
    named = plugins.owned_fields(failures)
    for failure in failures:
        logger.error(f"{failure}; going on without its answer.")
    return tuple(paths.parse(field) for field in named)


def guarded(plugins: PluginManager, logger: logging.Logger | logging.LoggerAdapter[Any], hook_name: str,
            call: Callable[[], T], fallback: T) -> T:
    """Call a hook that informs (not decides): on failure, log the plugin and use ``fallback``."""
    try:
        return call()
    except BaseException as e:  # noqa: B036
        culprit = plugins.culprit(e)
        logger.error(f"plugin {culprit!r} failed in {hook_name}: {type(e).__name__}: {e}; "
                     f"going on without its answer.")
        return fallback


def contained(plugins: PluginManager, run: HandlerRun, error: BaseException) -> PluginFailure | None:
    """
    A plugin failed: fall back to the safe side. For an object, that is a Retry at ERROR
    (its finalizer is kept); without one (activities), the stock decision (None) is safe,
    and the failure is logged here, as nothing else will mention it.
    """
    culprit = error.culprit if isinstance(error, HookResultError) else plugins.culprit(error)
    failure = f"plugin {culprit!r} failed: {type(error).__name__}: {error}"
    if run.body is None:
        run.logger.error(f"Handler {run.handler_id!r}: {failure}; Kopf's own decision stands.")
        return None
    return PluginFailure(f"{failure}; the finalizer is kept", delay=run.backoff, level=logging.ERROR)


class PluginFailure(Retry):
    """The fallback after a plugin failed: retried without end, never turned into a failure
    by the handler's ``retries=``/``timeout=``, so that a fault never releases a finalizer."""


class HookResultError(TypeError):
    """A hook returned something that is not an outcome."""

    def __init__(self, culprit: str, message: str) -> None:
        super().__init__(message)
        self.culprit = culprit


def _check(plugins: PluginManager, outcome: object, hook_name: str, optional: bool = True,
           **arguments: object) -> None:
    """A wrong value comes from no frame of the plugin: for a classification (``arguments``
    given), name the plugin that gave it; else the plugins implementing the hook."""
    if not isinstance(outcome, Outcome) and not (optional and outcome is None):
        culprit = (answers.first_answerer(plugins, hook_name, outcome, **arguments) if arguments
                   else " or ".join(plugins.implementers(hook_name)) or "a plugin")
        raise HookResultError(culprit, f"{hook_name} produced {outcome!r}, expected an Outcome "
                                       f"(Success, Pending, Retry or Fatal)")
