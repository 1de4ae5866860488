"""Precedence: handler > resource (most specific name first) > top level; nearest class wins."""

from __future__ import annotations

import logging

import kopf
import pytest

from kopf_outcomes import HandlerOptions, Pending, Retry
from kopf_outcomes.runs import ResourceRef

from .helpers import KOPFEXAMPLES, decide, plugins_with

INFO, WARNING, ERROR = logging.INFO, logging.WARNING, logging.ERROR
CORE_PODS = ResourceRef(group="", version="v1", plural="pods", kind="Pod")


def test_handler_scope_beats_a_more_specific_class_at_the_top_level() -> None:
    policy = (
        'exceptions."kopf.TemporaryError" = { level = "INFO" }\n'
        '[handlers.fn.exceptions."builtins.Exception"]\noutcome = "pending"\n'
    )
    assert decide(policy, exception=kopf.TemporaryError("t")) == Pending("t")
    assert decide(policy, handler_id="other", exception=kopf.TemporaryError("t")) == Retry(
        "t", delay=60, level=INFO
    )


def test_resource_scope_beats_the_top_level_and_loses_to_the_handler() -> None:
    policy = (
        'exceptions."builtins.ValueError" = { outcome = "retry", delay = 1, level = "DEBUG" }\n'
        '[resources.kopfexamples.exceptions."builtins.ValueError"]\n'
        'outcome = "retry"\ndelay = 2\nlevel = "INFO"\n'
        '[handlers.fn.exceptions."builtins.ValueError"]\n'
        'outcome = "retry"\ndelay = 3\nlevel = "WARNING"\n'
    )
    assert decide(
        policy, exception=ValueError("v"), handler_id="fn", resource=KOPFEXAMPLES
    ) == Retry("v", delay=3, level=WARNING)
    assert decide(
        policy, exception=ValueError("v"), handler_id="x", resource=KOPFEXAMPLES
    ) == Retry("v", delay=2, level=INFO)
    assert decide(policy, exception=ValueError("v"), handler_id="x", resource=CORE_PODS) == Retry(
        "v", delay=1, level=logging.DEBUG
    )


@pytest.mark.parametrize("order", [("OSError", "ConnectionError"), ("ConnectionError", "OSError")])
def test_within_a_scope_the_nearest_class_wins_whatever_the_file_order(
    order: tuple[str, str],
) -> None:
    delays = {"OSError": 1, "ConnectionError": 2}
    policy = "".join(
        f'exceptions."builtins.{name}" = {{ outcome = "retry", delay = {delays[name]} }}\n'
        for name in order
    )
    assert decide(policy, exception=ConnectionRefusedError("c")) == Retry("c", delay=2, level=ERROR)
    assert decide(policy, exception=FileNotFoundError("f")) == Retry("f", delay=1, level=ERROR)


@pytest.mark.parametrize(
    "names, winner",
    [
        (["kopfexamples.v1.kopf.dev", "kopfexamples.kopf.dev", "kopfexamples", "KopfExample"], 0),
        (["kopfexamples.kopf.dev", "kopfexamples", "KopfExample"], 0),
        (["KopfExample", "kopfexamples"], 1),
        (["KopfExample"], 0),
        (["kopfexamples.v2.kopf.dev", "KopfExample"], 1),  # another version: not this resource
    ],
)
def test_resource_names_most_specific_first(names: list[str], winner: int) -> None:
    policy = "".join(f'[resources."{name}"]\ndelay = {index}\n' for index, name in enumerate(names))
    assert decide(policy, exception=ValueError("v"), resource=KOPFEXAMPLES) == Retry(
        "v", delay=winner, level=ERROR
    )


def test_core_resources_are_named_plural_version() -> None:
    policy = '[resources."pods.v1"]\ndelay = 7\n[resources.pods]\ndelay = 8\n'
    assert decide(policy, exception=ValueError("v"), resource=CORE_PODS) == Retry(
        "v", delay=7, level=ERROR
    )


def test_settings_come_field_by_field_from_the_first_scope_that_sets_them() -> None:
    plugins = plugins_with(
        "remember = true\nexplicit_completion = false\n"
        '[resources.kopfexamples]\ndepends_on = ["spec.size"]\n'
        "explicit_completion = true\n"
        '[handlers.fn]\nfatal_on_delete = "retain"\n'
    )
    assert plugins.options("fn", KOPFEXAMPLES) == HandlerOptions(
        explicit_completion=True, depends_on=("spec.size",), remember=True, fatal_on_delete="retain"
    )
    assert plugins.options("fn", None) == HandlerOptions(
        explicit_completion=False, remember=True, fatal_on_delete="retain"
    )


def test_a_fixed_delay_and_a_backoff_are_one_setting() -> None:
    policy = (
        "backoff = { base = 100 }\n"
        "[resources.kopfexamples]\ndelay = 5\n"
        "[handlers.fn]\nbackoff = { base = 1, factor = 3 }\n"
    )
    assert decide(policy, exception=ValueError("v"), retry=2, resource=KOPFEXAMPLES) == Retry(
        "v", delay=9, level=ERROR
    )
    assert decide(
        policy, exception=ValueError("v"), retry=2, handler_id="x", resource=KOPFEXAMPLES
    ) == Retry("v", delay=5, level=ERROR)
    assert decide(policy, exception=ValueError("v"), retry=2, handler_id="x") == Retry(
        "v", delay=400, level=ERROR
    )


def test_levels_come_level_by_level() -> None:
    policy = (
        'levels = { retry = "INFO", fatal = "WARNING" }\n'
        '[handlers.fn]\nlevels = { retry = "DEBUG" }\n'
    )
    assert decide(policy, exception=kopf.TemporaryError("t", delay=1)) == Retry(
        "t", delay=1, level=logging.DEBUG
    )
    fatal = decide(policy, exception=kopf.PermanentError("p"))
    assert fatal is not None and getattr(fatal, "level", None) == WARNING


def test_escalation_steps_come_from_one_scope_as_a_whole() -> None:
    policy = (
        'escalate = [{ after_tries = 1, level = "CRITICAL" }]\n'
        '[handlers.fn]\nescalate = [{ after_tries = 9, level = "WARNING" }]\n'
    )
    assert decide(policy, exception=ValueError("v"), retry=2) is None
    assert decide(policy, exception=ValueError("v"), retry=2, handler_id="x") == Retry(
        "v", delay=60, level=logging.CRITICAL
    )


def test_handler_scopes_are_exact_handler_ids() -> None:
    policy = '[handlers.create_fn]\ndelay = 1\n[handlers."create_fn/sub1"]\ndelay = 2\n'
    assert decide(policy, exception=ValueError("v"), handler_id="create_fn/sub1") == Retry(
        "v", delay=2, level=ERROR
    )
    assert decide(policy, exception=ValueError("v"), handler_id="create_fn/sub2") is None
