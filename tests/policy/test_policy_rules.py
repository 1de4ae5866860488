"""Every rule kind, decided by the real engine with the policy plugin registered."""

from __future__ import annotations

import logging
import random

import kopf
import pytest

from kopf_outcomes import Fatal, HandlerOptions, Pending, Retry, Success
from kopf_outcomes.outcomes import deadline_of
from kopf_outcomes.policy import Backoff, ExceptionRule, Policy, Scope

from .helpers import KOPFEXAMPLES, decide, plugins_with

INFO, WARNING, ERROR = logging.INFO, logging.WARNING, logging.ERROR


class SlowBackend(kopf.TemporaryError):
    """A subclass of a Kopf exception, defined where no policy could name it."""


# --- stock parity ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "exception",
    [
        kopf.TemporaryError("later", delay=5),
        kopf.PermanentError("never"),
        ValueError("boom"),
    ],
)
def test_empty_policy_leaves_exceptions_to_stock_kopf(exception: Exception) -> None:
    assert decide("", exception=exception) is None


def test_empty_policy_leaves_results_to_stock_kopf() -> None:
    assert decide("", result={"any": "thing"}) is None


def test_rule_that_changes_nothing_leaves_the_run_to_stock_kopf() -> None:
    policy = 'exceptions."kopf.TemporaryError" = { level = "ERROR" }'
    assert decide(policy, exception=kopf.TemporaryError("later", delay=5)) is None


# --- exception rules -------------------------------------------------------------------------


def test_kopf_981_one_line_temporary_error_at_info_keeps_its_delay() -> None:
    policy = 'exceptions."kopf.TemporaryError" = { level = "INFO" }'
    assert decide(policy, exception=kopf.TemporaryError("not yet", delay=5)) == Retry(
        "not yet", delay=5, level=INFO
    )
    assert decide(policy, exception=kopf.TemporaryError("not yet")) == Retry(
        "not yet", delay=60, level=INFO
    )


def test_rule_matches_subclasses() -> None:
    policy = 'exceptions."kopf.TemporaryError" = { level = "INFO" }'
    assert decide(policy, exception=SlowBackend("slow", delay=7)) == Retry(
        "slow", delay=7, level=INFO
    )


def test_rule_does_not_match_unrelated_exceptions() -> None:
    policy = 'exceptions."builtins.TimeoutError" = { outcome = "pending" }'
    assert decide(policy, exception=ValueError("boom")) is None


@pytest.mark.parametrize(
    "toml, expected",
    [
        ('{ outcome = "pending" }', Pending("timed out")),
        ('{ outcome = "pending", delay = 30 }', Pending("timed out", recheck=30)),
        (
            '{ outcome = "retry", level = "WARNING", delay = 10 }',
            Retry("timed out", delay=10, level=WARNING),
        ),
        ('{ outcome = "retry" }', None),  # what stock Kopf does anyway: left to it
        (
            '{ outcome = "retry", delay = 60, level = "INFO" }',
            Retry("timed out", delay=60, level=INFO),
        ),
        ('{ outcome = "fatal", level = "WARNING" }', Fatal("timed out", level=WARNING)),
        ('{ outcome = "fatal" }', Fatal("timed out", level=ERROR)),
        ('{ outcome = "success" }', Success()),
    ],
)
def test_rule_outcomes(toml: str, expected: object) -> None:
    policy = f'exceptions."builtins.TimeoutError" = {toml}'
    assert decide(policy, exception=TimeoutError("timed out")) == expected


def test_rule_without_outcome_keeps_the_stock_outcome() -> None:
    policy = 'exceptions."kopf.PermanentError" = { level = "WARNING" }'
    assert decide(policy, exception=kopf.PermanentError("no")) == Fatal("no", level=WARNING)


def test_rule_turns_a_permanent_error_into_a_retry_after_kopfs_backoff() -> None:
    policy = 'exceptions."kopf.PermanentError" = { outcome = "retry" }'
    assert decide(policy, exception=kopf.PermanentError("no"), backoff=33) == Retry(
        "no", delay=33, level=ERROR
    )


def test_rule_follows_the_handlers_errors_mode_when_no_outcome_is_given() -> None:
    policy = 'exceptions."builtins.ValueError" = { level = "WARNING" }'
    assert decide(policy, exception=ValueError("x"), errors_mode="PERMANENT") == Fatal(
        "x", level=WARNING
    )
    # Stock Kopf ignores the error; a level alone does not turn it into something else.
    assert decide(policy, exception=ValueError("x"), errors_mode="IGNORED") is None


def test_rules_do_not_match_outcomes_raised_by_handlers() -> None:
    policy = 'exceptions."builtins.Exception" = { outcome = "fatal" }'
    assert decide(policy, exception=Pending("waiting")) == Pending("waiting")
    assert decide(policy, exception=Retry("x", delay=1, level=INFO)) == Retry(
        "x", delay=1, level=INFO
    )


def test_exception_without_message_is_named_by_its_repr() -> None:
    policy = 'exceptions."builtins.TimeoutError" = { outcome = "pending" }'
    assert decide(policy, exception=TimeoutError()) == Pending("TimeoutError()")


def test_python_policy_equals_toml_policy() -> None:
    policy = Policy(defaults=Scope(exceptions={"kopf.TemporaryError": ExceptionRule(level=INFO)}))
    assert decide(policy, exception=kopf.TemporaryError("x", delay=2)) == Retry(
        "x", delay=2, level=INFO
    )


# --- levels of stock readings ----------------------------------------------------------------


def test_levels_apply_to_stock_retries_and_fatals() -> None:
    policy = 'levels = { retry = "WARNING", fatal = "CRITICAL" }'
    assert decide(policy, exception=kopf.TemporaryError("t", delay=3)) == Retry(
        "t", delay=3, level=WARNING
    )
    assert decide(policy, exception=ValueError("v"), backoff=9) == Retry(
        "v", delay=9, level=WARNING
    )
    assert decide(policy, exception=kopf.PermanentError("p")) == Fatal("p", level=logging.CRITICAL)


def test_levels_are_the_default_for_rules_without_a_level() -> None:
    policy = (
        'levels = { retry = "WARNING" }\n'
        'exceptions."builtins.TimeoutError" = { outcome = "retry", delay = 1 }\n'
        'exceptions."builtins.KeyError" = { outcome = "retry", delay = 1, level = "DEBUG" }\n'
    )
    assert decide(policy, exception=TimeoutError("t")) == Retry("t", delay=1, level=WARNING)
    assert decide(policy, exception=KeyError("k")) == Retry("'k'", delay=1, level=logging.DEBUG)


def test_levels_do_not_change_what_a_handler_returned_itself() -> None:
    policy = 'levels = { retry = "DEBUG", fatal = "DEBUG" }'
    assert decide(policy, result=Retry("mine", delay=1, level=ERROR)) == Retry(
        "mine", delay=1, level=ERROR
    )
    assert decide(policy, result=Fatal("mine")) == Fatal("mine")


# --- retry backoff ---------------------------------------------------------------------------


def test_fixed_delay_of_a_scope_replaces_stock_delays() -> None:
    policy = "delay = 15"
    assert decide(policy, exception=kopf.TemporaryError("t", delay=5)) == Retry(
        "t", delay=15, level=ERROR
    )
    assert decide(policy, exception=ValueError("v")) == Retry("v", delay=15, level=ERROR)


def test_fixed_delay_of_a_rule_beats_the_scopes() -> None:
    policy = 'delay = 15\nexceptions."kopf.TemporaryError" = { delay = 2 }'
    assert decide(policy, exception=kopf.TemporaryError("t", delay=5)) == Retry(
        "t", delay=2, level=ERROR
    )


@pytest.mark.parametrize(
    "retry, delay", [(0, 10), (1, 20), (2, 40), (4, 160), (5, 300), (50, 300), (100_000, 300)]
)
def test_exponential_backoff_grows_from_base_by_factor_up_to_cap(retry: int, delay: float) -> None:
    policy = "backoff = { base = 10, factor = 2, cap = 300 }"
    assert decide(policy, exception=ValueError("v"), retry=retry) == Retry(
        "v", delay=delay, level=ERROR
    )


def test_exponential_backoff_of_a_rule() -> None:
    policy = (
        '[exceptions."builtins.ConnectionError"]\n'
        'outcome = "retry"\nlevel = "WARNING"\nbackoff = { base = 10, cap = 300 }\n'
    )
    assert decide(policy, exception=ConnectionError("c"), retry=3) == Retry(
        "c", delay=80, level=WARNING
    )


def test_backoff_jitter_only_shortens_the_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(random, "random", lambda: 0.5)
    policy = "backoff = { base = 100, cap = 100, jitter = 0.2 }"
    assert decide(policy, exception=ValueError("v"), retry=3) == Retry("v", delay=90, level=ERROR)


def test_backoff_jitter_stays_within_its_bounds() -> None:
    backoff = Backoff(base=10, factor=3, cap=1000, jitter=0.5)
    delays = {backoff.delay(2) for _ in range(200)}
    assert all(45 <= delay <= 90 for delay in delays) and len(delays) > 1


# --- escalation ------------------------------------------------------------------------------

ESCALATE = (
    'escalate = [{ after_tries = 5, level = "ERROR" }, '
    '{ after_seconds = 600, outcome = "fatal" }]\n'
)
QUIET = 'exceptions."kopf.TemporaryError" = { level = "INFO" }\n'


@pytest.mark.parametrize(
    "retry, runtime, expected",
    [
        (0, 0, Retry("t", delay=5, level=INFO)),
        (4, 0, Retry("t", delay=5, level=INFO)),
        (5, 0, Retry("t", delay=5, level=ERROR)),
        (4, 595, Retry("t", delay=5, level=INFO)),
        (4, 599, Retry("t", delay=1, level=INFO)),  # cut: it runs again at the deadline, not after
        (4, 600, Fatal("t (escalated to fatal after 600 seconds)", level=ERROR)),
    ],
)
def test_escalation_after_tries_and_after_seconds(
    retry: int, runtime: float, expected: object
) -> None:
    assert (
        decide(
            QUIET + ESCALATE,
            exception=kopf.TemporaryError("t", delay=5),
            retry=retry,
            runtime=runtime,
        )
        == expected
    )


def test_escalation_of_a_stock_retry() -> None:
    policy = 'escalate = [{ after_tries = 2, level = "CRITICAL" }]'
    assert decide(policy, exception=ValueError("v"), retry=1) is None
    assert decide(policy, exception=ValueError("v"), retry=2) == Retry(
        "v", delay=60, level=logging.CRITICAL
    )


def test_escalation_never_lowers_a_level() -> None:
    policy = 'escalate = [{ after_tries = 1, level = "INFO" }]'
    assert decide(policy, exception=ValueError("v"), retry=3) is None


def test_escalation_takes_the_highest_level_reached() -> None:
    policy = (
        'escalate = [{ after_tries = 1, level = "CRITICAL" }, '
        '{ after_tries = 2, level = "ERROR" }]\n'
        'exceptions."builtins.ValueError" = { level = "INFO" }\n'
    )
    assert decide(policy, exception=ValueError("v"), retry=2) == Retry(
        "v", delay=60, level=logging.CRITICAL
    )


def test_escalation_applies_to_retries_the_handler_returned() -> None:
    policy = 'escalate = [{ after_tries = 3, level = "ERROR" }]'
    assert decide(policy, result=Retry("mine", delay=1, level=INFO), retry=3) == Retry(
        "mine", delay=1, level=ERROR
    )


def test_escalation_turns_a_long_pending_into_fatal_at_the_fatal_level() -> None:
    policy = (
        'levels = { fatal = "WARNING" }\nescalate = [{ after_seconds = 3600, outcome = "fatal" }]'
    )
    assert decide(policy, result=Pending("waiting"), runtime=10) == Pending("waiting")
    assert decide(policy, result=Pending("waiting"), runtime=3600) == Fatal(
        "waiting (escalated to fatal after 3600 seconds)", level=WARNING
    )


def test_a_pending_under_a_time_based_escalation_carries_its_deadline() -> None:
    """Issue 34, finding 1: a parked Pending runs only on a change; its deadline makes it run then."""
    policy = 'escalate = [{ after_seconds = 3600, outcome = "fatal" }, { after_seconds = 600, outcome = "fatal" }]'
    waiting = decide(policy, result=Pending("waiting"), runtime=10)
    assert waiting == Pending("waiting") and deadline_of(waiting) == 600
    leveled = decide('escalate = [{ after_seconds = 600, level = "ERROR" }]', result=Pending("waiting"), runtime=10)
    assert leveled == Pending("waiting") and deadline_of(leveled) is None  # no fatal step: nothing to run for
    assert deadline_of(Pending("waiting")) is None


def test_escalation_leaves_successes_alone() -> None:
    policy = 'escalate = [{ after_tries = 1, outcome = "fatal" }]'
    assert decide(policy, result=Success("ok"), retry=5) == Success("ok")


def test_escalation_of_a_rule_replaces_the_scopes() -> None:
    policy = (
        'escalate = [{ after_tries = 1, outcome = "fatal" }]\n'
        '[exceptions."builtins.TimeoutError"]\n'
        'outcome = "retry"\nlevel = "WARNING"\ndelay = 10\n'
        'escalate = [{ after_tries = 5, level = "ERROR" }]\n'
    )
    assert decide(policy, exception=TimeoutError("t"), retry=2) == Retry(
        "t", delay=10, level=WARNING
    )
    assert decide(policy, exception=TimeoutError("t"), retry=5) == Retry("t", delay=10, level=ERROR)
    assert decide(policy, exception=ValueError("v"), retry=2) == Fatal(
        "v (escalated to fatal after 1 tries)", level=ERROR
    )


def test_issue_example_requests_timeout_like_rule() -> None:
    """ "A Retry at WARNING every 10 s, exponential to 5 min, escalating to ERROR after 5 tries"."""
    policy = (
        '[exceptions."builtins.TimeoutError"]\n'
        'outcome = "retry"\nlevel = "WARNING"\n'
        "backoff = { base = 10, factor = 2, cap = 300 }\n"
        'escalate = [{ after_tries = 5, level = "ERROR" }]\n'
    )
    outcomes = [decide(policy, exception=TimeoutError("t"), retry=retry) for retry in range(7)]
    assert outcomes == [
        Retry("t", delay=10, level=WARNING),
        Retry("t", delay=20, level=WARNING),
        Retry("t", delay=40, level=WARNING),
        Retry("t", delay=80, level=WARNING),
        Retry("t", delay=160, level=WARNING),
        Retry("t", delay=300, level=ERROR),
        Retry("t", delay=300, level=ERROR),
    ]


# --- handler options: explicit completion, fatal-on-delete, memory scope, remember -----------


def test_handler_options_from_a_policy() -> None:
    plugins = plugins_with(
        "[handlers.delete_fn]\nexplicit_completion = true\n"
        'fatal_on_delete = "retain"\ndepends_on = ["status.deletion"]\n'
        "remember = true\n"
    )
    assert plugins.options("delete_fn", KOPFEXAMPLES) == HandlerOptions(
        explicit_completion=True,
        depends_on=("status.deletion",),
        remember=True,
        fatal_on_delete="retain",
    )
    assert plugins.options("create_fn", KOPFEXAMPLES) == HandlerOptions()


@pytest.mark.parametrize(
    "result, expected",
    [
        (True, Success()),
        (False, Pending("not complete yet")),
    ],
)
def test_explicit_completion_from_a_policy(result: bool, expected: object) -> None:
    policy = "[handlers.delete_fn]\nexplicit_completion = true\n"
    assert decide(policy, handler_id="delete_fn", result=result) == expected
    assert decide(policy, handler_id="other_fn", result=result) is None


def test_explicit_completion_rejects_other_values_and_keeps_the_finalizer() -> None:
    outcome = decide("explicit_completion = true", result="done?")
    assert isinstance(outcome, Retry) and outcome.level == ERROR


def test_fatal_on_delete_from_the_top_level() -> None:
    plugins = plugins_with('fatal_on_delete = "release"')
    assert plugins.options("fn", None).fatal_on_delete == "release"


def test_retain_for_kopfs_permanent_error_is_the_guards_not_the_policys() -> None:
    """The policy restates no finalizer rule: Kopf's PermanentError stays stock here, and the
    finalizer guard at the Kopf boundary retains it by the option (tests/unit/test_guard.py)."""
    policy = '[handlers.delete_fn]\nfatal_on_delete = "retain"\n'
    error = kopf.PermanentError("no")
    assert decide(policy, handler_id="delete_fn", reason="delete", exception=error) is None
    assert decide(policy, handler_id="delete_fn", reason="update", exception=error) is None
    assert decide(policy, handler_id="other_fn", reason="delete", exception=error) is None


def test_a_rules_fatal_and_an_escalated_one_leave_retain_to_the_handlers_option() -> None:
    """Not stock: the engine realizes them, taking fatal_on_delete from the handler's options."""
    policy = (
        'fatal_on_delete = "retain"\n'
        'exceptions."builtins.ValueError" = { outcome = "fatal" }\n'
        'escalate = [{ after_tries = 3, outcome = "fatal" }]\n'
    )
    assert decide(policy, reason="delete", exception=ValueError("v")) == Fatal("v")
    assert decide(policy, reason="delete", exception=KeyError("k"), retry=3) == Fatal(
        "'k' (escalated to fatal after 3 tries)"
    )
    assert plugins_with(policy).options("fn", None).fatal_on_delete == "retain"
