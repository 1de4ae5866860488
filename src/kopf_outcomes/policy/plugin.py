"""
The policy as a plugin: the same hooks as any other plugin, no special path in the engine.

It is not ``trylast``, so it decides before the built-ins; what it does not decide, stock
Kopf's reading does. An outcome it would leave as it is stays *stock*, so an empty policy
changes nothing at all (stock parity).
"""
from __future__ import annotations

import logging

from kopf_outcomes import builtin
from kopf_outcomes.hookspecs import hookimpl
from kopf_outcomes.options import HandlerOptions
from kopf_outcomes.outcomes import Fatal, Outcome, Pending, Retry, Success, with_deadline
from kopf_outcomes.policy.model import Backoff, Escalation, ExceptionRule, Policy
from kopf_outcomes.policy.resolution import Resolver, Setting, Settings
from kopf_outcomes.runs import Decision, HandlerRun, ResourceRef

POLICY_PLUGIN_NAME = "kopf_outcomes.policy"


class PolicyPlugin:
    """Decides outcomes by a :class:`~kopf_outcomes.policy.Policy`; checks it when created."""

    name = POLICY_PLUGIN_NAME

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.resolver = Resolver(policy)

    @hookimpl
    def kopf_outcomes_handler_options(
        self, handler_id: str, resource: ResourceRef | None
    ) -> HandlerOptions | None:
        options = self.resolver.settings(handler_id, resource).options
        return options if options != HandlerOptions() else None

    @hookimpl
    def kopf_outcomes_classify_exception(
        self, run: HandlerRun, exception: Exception
    ) -> Outcome | None:
        found = self.resolver.match(run.handler_id, run.resource, type(exception))
        if found is None:
            return None
        stock = builtin.stock_reading(run, exception=exception).outcome
        settings = self.resolver.settings(run.handler_id, run.resource)
        outcome = _by_rule(found.rule, stock, settings, run, str(exception) or repr(exception))
        # What equals the stock reading is left to the built-in: stock Kopf then runs it as is.
        return None if outcome is None or outcome == stock else outcome

    @hookimpl
    def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None:
        settings = self.resolver.settings(run.handler_id, run.resource)
        outcome = decision.outcome
        if decision.stock:
            outcome = _restyled(outcome, settings, run)
        steps = self.resolver.escalation(run.handler_id, run.resource, decision.origin)
        if steps is not None:
            outcome = escalated(outcome, steps.value, settings, run)
        decision.outcome = outcome


def _by_rule(rule: ExceptionRule, stock: Outcome, settings: Settings, run: HandlerRun,
             reason: str) -> Outcome | None:
    """The outcome a rule gives; None if it keeps the stock outcome and that is not a failure."""
    kind = rule.outcome or ("retry" if isinstance(stock, Retry)
                            else "fatal" if isinstance(stock, Fatal) else None)
    if kind == "success":
        return Success()
    if kind == "pending":
        return Pending(reason, recheck=rule.delay)
    if kind == "fatal":
        return Fatal(reason, level=_level(rule.level, settings.fatal_level, stock))
    if kind == "retry":
        delay = (rule.delay if rule.delay is not None
                 else rule.backoff.delay(run.retry) if rule.backoff is not None
                 else _delay(settings.timing, run) if settings.timing is not None
                 else stock.delay if isinstance(stock, Retry)
                 else run.backoff)
        return Retry(reason, delay=delay, level=_level(rule.level, settings.retry_level, stock))
    return None  # no outcome given, and stock Kopf ignores this error (errors=IGNORED)


def _restyled(stock: Outcome, settings: Settings, run: HandlerRun) -> Outcome:
    """A stock Retry/Fatal with the scopes' levels, delays and fatal-on-delete; else unchanged."""
    if isinstance(stock, Retry) and (settings.retry_level or settings.timing):
        delay = _delay(settings.timing, run) if settings.timing is not None else stock.delay
        return Retry(stock.reason, delay=delay, level=_level(None, settings.retry_level, stock))
    # "retain" is not restated here: the finalizer guard applies it to every final failure.
    if isinstance(stock, Fatal) and settings.fatal_level:
        return Fatal(stock.reason, level=_level(None, settings.fatal_level, stock))
    return stock


def escalated(outcome: Outcome, steps: tuple[Escalation, ...], settings: Settings,
              run: HandlerRun) -> Outcome:
    """A Retry at the highest level reached; a Retry or Pending turned Fatal if a step says so."""
    reached = [step for step in steps if step.reached(run.retry, run.runtime)]
    levels = [step.level for step in reached if step.level is not None]
    fatal = next((step for step in reached if step.outcome == "fatal"), None)
    if fatal is not None and isinstance(outcome, (Retry, Pending)):
        level = max(levels) if levels else _level(None, settings.fatal_level, None)
        reason = f"{outcome.reason} (escalated to fatal {describe_threshold(fatal)})"
        return Fatal(reason, level=level)
    if isinstance(outcome, Retry) and levels and max(levels) > outcome.level:
        outcome = Retry(outcome.reason, delay=outcome.delay, level=max(levels))
    return _due(outcome, steps, run) if fatal is None else outcome


def _due(outcome: Outcome, steps: tuple[Escalation, ...], run: HandlerRun) -> Outcome:
    """A time-based fatal step not reached yet is a deadline: a Pending runs again then (a parked
    one would run only on a change), and a Retry no later than then (its delay is cut)."""
    limits = [step.after_seconds for step in steps if step.outcome == "fatal" and step.after_seconds is not None]
    if not limits:
        return outcome
    limit = min(limits)
    if isinstance(outcome, Pending):
        return with_deadline(outcome, limit)
    if isinstance(outcome, Retry):  # cut again when Kopf takes it, from the run's end (translation.retry)
        cut = Retry(outcome.reason, delay=max(0.0, limit - run.runtime), level=outcome.level) \
            if run.runtime + outcome.delay > limit else outcome
        return with_deadline(cut, limit)
    return outcome


def describe_threshold(step: Escalation) -> str:
    if step.after_tries is not None:
        return f"after {step.after_tries} tries"
    return f"after {step.after_seconds:g} seconds"


def _level(own: int | None, scoped: Setting[int] | None, stock: Outcome | None) -> int:
    """The rule's level, else the scopes', else the stock reading's (ERROR, as Kopf logs errors)."""
    if own is not None:
        return own
    if scoped is not None:
        return scoped.value
    return stock.level if isinstance(stock, (Retry, Fatal)) else logging.ERROR


def _delay(timing: Setting[float | Backoff], run: HandlerRun) -> float:
    return timing.value.delay(run.retry) if isinstance(timing.value, Backoff) else timing.value
