"""
Deciding an outcome: classification, adjustment and observation through the plugins.

This module knows nothing of Kopf's internals; :mod:`kopf_outcomes.patch` feeds it runs
and turns its decisions into what Kopf does next.
"""
from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any

from kopf_outcomes import builtin
from kopf_outcomes.outcomes import Outcome, Retry
from kopf_outcomes.plugins import Plugins
from kopf_outcomes.runs import Decision, HandlerRun


def decide(plugins: Plugins, run: HandlerRun, *, result: object = None,
           exception: Exception | None = None) -> Outcome | None:
    """
    The outcome of a run, or None to leave the run to stock Kopf as it is.

    A plugin that fails is contained: the run becomes a Retry at ERROR (finalizer kept).
    """
    if plugins.decides_builtin:  # the hot path: no pluggy round-trips for nothing
        if exception is None:
            outcome = builtin.kopf_outcomes_classify_result(run=run, result=result)
        else:
            outcome = builtin.kopf_outcomes_classify_exception(run=run, exception=exception)
        return None if builtin.is_stock(outcome) else outcome

    hook = plugins.manager.hook
    try:
        if exception is None:
            outcome = hook.kopf_outcomes_classify_result(run=run, result=result)
            _check(plugins, outcome, "kopf_outcomes_classify_result")
        else:
            outcome = hook.kopf_outcomes_classify_exception(run=run, exception=exception)
            _check(plugins, outcome, "kopf_outcomes_classify_exception")
        decision = Decision(outcome=outcome, origin=exception if exception is not None else result)
        hook.kopf_outcomes_adjust_outcome(run=run, decision=decision)
        _check(plugins, decision.outcome, "kopf_outcomes_adjust_outcome")
    except Exception as e:
        return contained(plugins, run, e)
    if decision.outcome is outcome and builtin.is_stock(outcome):
        return None
    return decision.outcome


def observe(plugins: Plugins, run: HandlerRun, outcome: Outcome,
            patch: MutableMapping[str, Any]) -> PluginFailure | None:
    """Tell the observers; return the fallback outcome if one of them failed, else None."""
    if not plugins.observed:
        return None
    try:
        plugins.manager.hook.kopf_outcomes_observe_outcome(run=run, outcome=outcome, patch=patch)
    except Exception as e:
        return contained(plugins, run, e)
    return None


def contained(plugins: Plugins, run: HandlerRun, error: Exception) -> PluginFailure | None:
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


def _check(plugins: Plugins, outcome: object, hook_name: str) -> None:
    """A wrong value comes from no frame of the plugin: name the plugins implementing the hook."""
    if not isinstance(outcome, Outcome):
        caller = getattr(plugins.manager.hook, hook_name)
        names = [plugins.manager.get_name(impl.plugin) or "?" for impl in caller.get_hookimpls()
                 if impl.plugin is not builtin]
        raise HookResultError(" or ".join(names) or "a plugin",
                              f"{hook_name} produced {outcome!r}, expected an Outcome "
                              f"(Success, Pending, Retry or Fatal)")
