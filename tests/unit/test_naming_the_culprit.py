"""Diagnostics name the hook and the plugin that are at fault: a slow classification is not
blamed on the adjust hook, and a wrong-typed answer of an informing hook names its plugin."""
from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import pytest

from kopf_outcomes import Decision, HandlerOptions, HandlerRun, Outcome, ResourceRef, Success, engine, hookimpl
from kopf_outcomes.manager import PluginManager as Plugins
from kopf_outcomes.options import UnreadOptions
from tests.unit.test_engine import KOPFEXAMPLES, make_run

PAUSE = 0.08  # longer than the slow-hook threshold set below


class SlowClassifier:
    @hookimpl
    def kopf_outcomes_classify_result(self, run: HandlerRun, result: object) -> Outcome | None:
        time.sleep(PAUSE)
        return None


class SlowExceptionClassifier:
    @hookimpl
    def kopf_outcomes_classify_exception(self, run: HandlerRun, exception: Exception) -> Outcome | None:
        time.sleep(PAUSE)
        return None


class QuickAdjuster:
    @hookimpl
    def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None:
        pass


class SlowAdjuster:
    @hookimpl
    def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None:
        time.sleep(PAUSE)


def slow_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "blocked the event loop" in r.getMessage()]


@pytest.fixture(autouse=True)
def quick_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "SLOW_HOOK", PAUSE / 2)


def test_a_slow_classify_result_hook_is_named_not_adjust(caplog: pytest.LogCaptureFixture) -> None:
    plugins = Plugins()
    plugins.register(SlowClassifier(), name="slowpoke")
    plugins.register(QuickAdjuster(), name="adjuster")
    with caplog.at_level(logging.WARNING):
        engine.decide(plugins, make_run(), result=None)
    [warning] = slow_warnings(caplog)
    assert warning.startswith("kopf_outcomes_classify_result blocked the event loop for ")
    assert "(plugins: slowpoke)" in warning


def test_a_slow_classify_exception_hook_is_named(caplog: pytest.LogCaptureFixture) -> None:
    plugins = Plugins()
    plugins.register(SlowExceptionClassifier(), name="slowpoke")
    with caplog.at_level(logging.WARNING):
        engine.decide(plugins, make_run(), exception=RuntimeError("x"))
    [warning] = slow_warnings(caplog)
    assert warning.startswith("kopf_outcomes_classify_exception blocked") and "(plugins: slowpoke)" in warning


def test_a_slow_adjust_hook_is_named_and_a_quick_classification_is_not(caplog: pytest.LogCaptureFixture) -> None:
    plugins = Plugins()
    plugins.register(SlowAdjuster(), name="dawdler")
    with caplog.at_level(logging.WARNING):
        engine.decide(plugins, make_run(), result=Success())
    [warning] = slow_warnings(caplog)
    assert warning.startswith("kopf_outcomes_adjust_outcome blocked") and "(plugins: dawdler)" in warning


def test_both_slow_are_both_named_each_with_its_own_time(caplog: pytest.LogCaptureFixture) -> None:
    plugins = Plugins()
    plugins.register(SlowClassifier(), name="slowpoke")
    plugins.register(SlowAdjuster(), name="dawdler")
    with caplog.at_level(logging.WARNING):
        engine.decide(plugins, make_run(), result=None)
    warnings = slow_warnings(caplog)
    assert [w.split()[0] for w in warnings] == ["kopf_outcomes_classify_result", "kopf_outcomes_adjust_outcome"]
    seconds = [float(w.split(" for ")[1].split("s ")[0]) for w in warnings]
    assert all(s < 2 * PAUSE + 0.05 for s in seconds)  # each its own, not the sum of both


class GoodOptions:
    @hookimpl
    def kopf_outcomes_handler_options(self, handler_id: str, resource: ResourceRef | None) -> HandlerOptions:
        return HandlerOptions(remember=True)


class DictOptions:
    @hookimpl
    def kopf_outcomes_handler_options(self, handler_id: str, resource: ResourceRef | None) -> object:
        return {"remember": True}


class GoodFields:
    @hookimpl
    def kopf_outcomes_owned_fields(self) -> Iterable[str]:
        yield "status.conditions"  # a generator: read once, still counted


class BareStringFields:
    @hookimpl
    def kopf_outcomes_owned_fields(self) -> object:
        return "status.metrics"


class NumberFields:
    @hookimpl
    def kopf_outcomes_owned_fields(self) -> object:
        return 42


def logged_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_wrong_typed_options_answer_names_its_plugin(caplog: pytest.LogCaptureFixture) -> None:
    plugins = Plugins()
    plugins.register(GoodOptions(), name="good")
    plugins.register(DictOptions(), name="dicty")
    with caplog.at_level(logging.ERROR):
        options = engine.options(plugins, lambda: None, "h", KOPFEXAMPLES, logging.getLogger("test"))
    assert options.remember is True  # the well-behaved plugin's options stand; only dicty's are left out
    assert isinstance(options, UnreadOptions) and "dicty" in options.failures[0]
    [error] = logged_errors(caplog)
    assert error.startswith("plugin 'dicty' failed in kopf_outcomes_handler_options: "
                            "it answered {'remember': True}"), error
    assert "good" not in error


@pytest.mark.parametrize("bad", [BareStringFields, NumberFields])
def test_a_wrong_typed_owned_fields_answer_names_its_plugin(bad: type, caplog: pytest.LogCaptureFixture) -> None:
    plugins = Plugins()
    plugins.register(GoodFields(), name="good")
    plugins.register(bad(), name="oddball")
    with caplog.at_level(logging.ERROR):
        assert engine.owned_fields(plugins, logging.getLogger("test")) == (("status", "conditions"),)  # good's stand
    [error] = logged_errors(caplog)
    assert error.startswith("plugin 'oddball' failed in kopf_outcomes_owned_fields: it answered "), error


def test_owned_fields_from_a_generator_are_kept() -> None:
    plugins = Plugins()
    plugins.register(GoodFields(), name="good")
    assert plugins.owned_fields() == ("status.conditions",)


# Issue 44, finding 12: a plugin that answers wrongly once, then None, got its neighbour blamed.

class WrongOnceOptions:
    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def kopf_outcomes_handler_options(self, handler_id: str, resource: ResourceRef | None) -> object:
        self.calls += 1
        return {"remember": True} if self.calls == 1 else None


class WrongOnceClassifier:
    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def kopf_outcomes_classify_result(self, run: HandlerRun, result: object) -> object:
        self.calls += 1
        return "done" if self.calls == 1 else None


class WellBehavedClassifier:
    @hookimpl
    def kopf_outcomes_classify_result(self, run: HandlerRun, result: object) -> Outcome | None:
        return Success()


def test_an_options_plugin_wrong_once_then_none_is_blamed_alone(caplog: pytest.LogCaptureFixture) -> None:
    plugins = Plugins()
    plugins.register(GoodOptions(), name="good")
    plugins.register(WrongOnceOptions(), name="flaky")
    with caplog.at_level(logging.ERROR):
        options = engine.options(plugins, lambda: None, "h", KOPFEXAMPLES, logging.getLogger("test"))
    [error] = logged_errors(caplog)
    assert error.startswith("plugin 'flaky' failed in kopf_outcomes_handler_options"), error
    assert "good" not in error
    assert options.remember is True  # the neighbour's answer stands


def test_a_classifier_wrong_once_then_none_does_not_get_its_neighbour_blamed() -> None:
    plugins = Plugins()
    plugins.register(WellBehavedClassifier(), name="neighbour")
    plugins.register(WrongOnceClassifier(), name="flaky")  # pluggy asks the last registered first
    outcome = engine.decide(plugins, make_run(), result="anything")
    assert isinstance(outcome, engine.PluginFailure)
    assert "neighbour" not in outcome.reason, outcome.reason
    assert outcome.reason.startswith("plugin 'unknown plugin' failed"), outcome.reason
