"""Deciding outcomes: the built-ins (stock parity), plugins that classify, adjust, observe, fail."""

from __future__ import annotations

import logging
import threading
import types
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any

import kopf
import pytest

from kopf_outcomes import (
    Decision,
    Fatal,
    HandlerOptions,
    HandlerRun,
    Outcome,
    Pending,
    ResourceRef,
    Retry,
    Success,
    builtin,
    engine,
    hookimpl,
)
from kopf_outcomes.engine import PluginFailure
from kopf_outcomes.manager import PluginManager as Plugins
from tests.unit.conftest import Collector

NO_OPTIONS = HandlerOptions()
BODY = {"metadata": {"name": "example", "namespace": "default", "uid": "uid-1"}}
KOPFEXAMPLES = ResourceRef("kopf.dev", "v1", "kopfexamples", "KopfExample")


def make_run(
    logger: logging.Logger | None = None,
    *,
    body: Any = BODY,
    options: HandlerOptions = NO_OPTIONS,
    reason: str | None = "update",
    errors_mode: str = "TEMPORARY",
    backoff: float = 60.0,
    handler_id: str = "h",
) -> HandlerRun:
    return HandlerRun(
        handler_id=handler_id,
        reason=reason,
        resource=KOPFEXAMPLES if body is not None else None,
        body=body,
        retry=0,
        runtime=0.0,
        deleting=False,
        options=options,
        logger=logger if logger is not None else logging.getLogger("test"),
        errors_mode=errors_mode,
        backoff=backoff,
    )


# --- the built-ins alone: stock stays stock ------------------------------------------------------


@pytest.mark.parametrize("result", [None, {"a": 1}, 0, "", True, False, [1]])
def test_plain_results_are_left_to_kopf(result: object) -> None:
    assert engine.decide(Plugins(), make_run(), result=result) is None


@pytest.mark.parametrize(
    "exception",
    [
        kopf.TemporaryError("later", delay=5),
        kopf.TemporaryError("later", delay=None),
        kopf.PermanentError("never"),
        ValueError("boom"),
        RuntimeError(),
        KeyError("k"),
    ],
    ids=repr,
)
@pytest.mark.parametrize("errors_mode", ["TEMPORARY", "PERMANENT", "IGNORED"])
def test_exceptions_are_left_to_kopf(exception: Exception, errors_mode: str) -> None:
    run = make_run(errors_mode=errors_mode)
    assert engine.decide(Plugins(), run, exception=exception) is None


@pytest.mark.parametrize(
    "outcome", [Success({"r": 1}), Pending("p", recheck=5), Retry("r", delay=1), Fatal("f")], ids=repr
)
def test_outcome_objects_returned_or_raised_are_taken_as_they_are(outcome: Outcome) -> None:
    assert engine.decide(Plugins(), make_run(), result=outcome) is outcome
    assert engine.decide(Plugins(), make_run(), exception=outcome) is outcome


def test_explicit_completion_true_is_success() -> None:
    run = make_run(options=HandlerOptions(explicit_completion=True))
    assert engine.decide(Plugins(), run, result=True) == Success()


def test_explicit_completion_false_is_pending() -> None:
    run = make_run(options=HandlerOptions(explicit_completion=True))
    outcome = engine.decide(Plugins(), run, result=False)
    assert isinstance(outcome, Pending)
    assert outcome.recheck is None


@pytest.mark.parametrize("value", [None, 1, 0, "yes", {"done": True}])
def test_explicit_completion_other_values_are_retries_at_error(value: object) -> None:
    run = make_run(options=HandlerOptions(explicit_completion=True), backoff=7)
    outcome = engine.decide(Plugins(), run, result=value)
    assert type(outcome) is Retry
    assert outcome.level == logging.ERROR
    assert outcome.delay == 7
    assert f"explicit completion expects True or False, got {value!r}" in outcome.reason


def test_explicit_completion_still_takes_outcome_objects() -> None:
    run = make_run(options=HandlerOptions(explicit_completion=True))
    assert engine.decide(Plugins(), run, result=Pending("x")) == Pending("x")


def test_explicit_completion_off_leaves_booleans_to_kopf() -> None:
    run = make_run(options=HandlerOptions(explicit_completion=False))
    assert engine.decide(Plugins(), run, result=False) is None


def test_permanent_error_on_delete_with_retain_option_is_left_to_kopf_and_the_guard() -> None:
    """The engine restates no finalizer rule: the guard at the Kopf boundary retains Kopf's own
    final failures (tests/unit/test_guard.py), so the engine leaves a PermanentError stock."""
    retain = HandlerOptions(fatal_on_delete="retain")
    deleting = make_run(options=retain, reason="delete")
    assert engine.decide(Plugins(), deleting, exception=kopf.PermanentError("gone wrong")) is None
    # Not on deletion, and not without the option: stock.
    updating = make_run(options=retain, reason="update")
    assert engine.decide(Plugins(), updating, exception=kopf.PermanentError("x")) is None
    plain = make_run(reason="delete")
    assert engine.decide(Plugins(), plain, exception=kopf.PermanentError("x")) is None


@pytest.mark.parametrize(
    ("exception", "errors_mode", "expected"),
    [
        (kopf.TemporaryError("later", delay=5), "TEMPORARY", Retry("later", delay=5, level="ERROR")),
        (kopf.TemporaryError("later", delay=None), "TEMPORARY", Retry("later", delay=0, level="ERROR")),
        # Kopf passes None on as the message: str() is "None", as Kopf logs it.
        (kopf.TemporaryError(), "TEMPORARY", Retry("None", delay=60, level="ERROR")),
        (kopf.PermanentError("never"), "TEMPORARY", Fatal("never")),
        (ValueError("boom"), "TEMPORARY", Retry("boom", delay=9, level="ERROR")),
        (ValueError("boom"), "PERMANENT", Fatal("boom")),
        (ValueError("boom"), "IGNORED", Success()),
        (RuntimeError(), "PERMANENT", Fatal("RuntimeError()")),
    ],
)
def test_builtin_reading_of_exceptions_mirrors_kopf(
    exception: Exception, errors_mode: str, expected: Outcome
) -> None:
    run = make_run(errors_mode=errors_mode, backoff=9)
    assert builtin.kopf_outcomes_classify_exception(run=run, exception=exception) == expected
    reading = builtin.stock_reading(run, exception=exception)
    assert reading.outcome == expected
    assert reading.stock


def test_builtin_reading_of_results_marks_plain_results_as_stock() -> None:
    assert builtin.stock_reading(make_run(), result=1) == (Success(1), True)
    assert builtin.stock_reading(make_run(), result=Success(1)) == (Success(1), False)


def test_decision_is_stock_only_while_its_outcome_is_the_stock_reading() -> None:
    stock = Success(1)
    decision = Decision(outcome=stock, origin=1, stock_reading=stock)
    assert decision.stock
    decision.outcome = Success(1)  # equal, but a plugin's own
    assert not decision.stock
    assert not Decision(outcome=Success(1), origin=1).stock


# --- plugins: classification -------------------------------------------------------------------


class Classifier:
    """Timeouts mean Pending; the result "later" means Retry."""

    @hookimpl
    def kopf_outcomes_classify_exception(self, run: HandlerRun, exception: Exception) -> Outcome | None:
        return Pending("waiting") if isinstance(exception, TimeoutError) else None

    @hookimpl
    def kopf_outcomes_classify_result(self, run: HandlerRun, result: object) -> Outcome | None:
        return Retry("asked to", delay=1) if result == "later" else None


def test_a_classify_plugin_decides_before_the_builtins() -> None:
    plugins = Plugins()
    plugins.register(Classifier(), name="classifier")
    assert engine.decide(plugins, make_run(), exception=TimeoutError()) == Pending("waiting")
    assert engine.decide(plugins, make_run(), result="later") == Retry("asked to", delay=1)


def test_a_classify_plugin_can_pass_to_the_builtins() -> None:
    plugins = Plugins()
    plugins.register(Classifier(), name="classifier")
    assert engine.decide(plugins, make_run(), exception=ValueError()) is None
    assert engine.decide(plugins, make_run(), result={"a": 1}) is None
    assert engine.decide(plugins, make_run(), result=Fatal("x")) == Fatal("x")


def test_a_classify_plugin_sees_the_run_and_the_origin() -> None:
    seen: list[tuple[HandlerRun, object]] = []

    class Spy:
        @hookimpl
        def kopf_outcomes_classify_result(self, run: HandlerRun, result: object) -> None:
            seen.append((run, result))

    plugins = Plugins()
    plugins.register(Spy(), name="spy")
    run = make_run(handler_id="delete_fn")
    engine.decide(plugins, run, result={"x": 1})
    assert seen == [(run, {"x": 1})]


# --- plugins: adjustment -----------------------------------------------------------------------


def test_adjust_hooks_run_in_turn_and_see_each_others_replacements() -> None:
    seen: list[tuple[str, Outcome, object]] = []

    class Soften:
        @hookimpl(tryfirst=True)
        def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None:
            seen.append(("soften", decision.outcome, decision.origin))
            decision.outcome = Retry(str(decision.outcome), level=logging.INFO)

    class Escalate:
        @hookimpl(trylast=True)
        def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None:
            seen.append(("escalate", decision.outcome, decision.origin))
            decision.outcome = Fatal(f"escalated: {decision.outcome}")

    plugins = Plugins()
    plugins.register(Escalate(), name="escalate")
    plugins.register(Soften(), name="soften")
    error = ValueError("boom")
    outcome = engine.decide(plugins, make_run(backoff=5), exception=error)
    assert outcome == Fatal("escalated: boom")
    assert seen == [
        ("soften", Retry("boom", delay=5, level=logging.ERROR), error),
        ("escalate", Retry("boom", level=logging.INFO), error),
    ]


def test_an_adjust_hook_that_changes_nothing_leaves_stock_to_kopf() -> None:
    calls: list[str] = []

    class Watcher:
        @hookimpl
        def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None:
            calls.append(run.handler_id)

    plugins = Plugins()
    plugins.register(Watcher(), name="watcher")
    assert engine.decide(plugins, make_run(), result={"a": 1}) is None
    assert engine.decide(plugins, make_run(), exception=kopf.TemporaryError("x")) is None
    assert calls == ["h", "h"]


def test_an_adjust_hook_replacing_a_stock_outcome_makes_it_ours() -> None:
    class Quieter:
        @hookimpl
        def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None:
            if isinstance(decision.outcome, Retry):
                decision.outcome = Retry(decision.outcome.reason, delay=decision.outcome.delay,
                                         level=logging.INFO)

    plugins = Plugins()
    plugins.register(Quieter(), name="quieter")
    outcome = engine.decide(plugins, make_run(), exception=kopf.TemporaryError("x", delay=3))
    assert outcome == Retry("x", delay=3, level=logging.INFO)


# --- plugins: containment ----------------------------------------------------------------------


class Broken:
    @hookimpl
    def kopf_outcomes_classify_result(self, run: HandlerRun, result: object) -> None:
        raise RuntimeError("classifier bug")


def test_a_raising_plugin_becomes_a_plugin_failure_naming_it() -> None:
    plugins = Plugins()
    plugins.register(Broken(), name="broken-one")
    outcome = engine.decide(plugins, make_run(backoff=11), result={"a": 1})
    assert isinstance(outcome, engine.PluginFailure)
    assert isinstance(outcome, Retry)
    assert outcome.level == logging.ERROR
    assert outcome.delay == 11
    assert outcome.reason == (
        "plugin 'broken-one' failed: RuntimeError: classifier bug; the finalizer is kept"
    )


def test_a_raising_module_plugin_is_named_too() -> None:
    module = types.ModuleType("my_adjuster")

    @hookimpl
    def kopf_outcomes_adjust_outcome(run: HandlerRun, decision: Decision) -> None:
        raise KeyError("missing")

    module.kopf_outcomes_adjust_outcome = kopf_outcomes_adjust_outcome  # type: ignore[attr-defined]
    plugins = Plugins()
    plugins.register(Classifier(), name="innocent")
    plugins.register(module, name="my-adjuster")
    outcome = engine.decide(plugins, make_run(), exception=TimeoutError())
    assert isinstance(outcome, engine.PluginFailure)
    assert outcome.reason.startswith("plugin 'my-adjuster' failed: KeyError: 'missing'")


def test_the_culprit_is_found_among_many_plugins() -> None:
    class AlsoBroken:
        @hookimpl
        def kopf_outcomes_classify_exception(self, run: HandlerRun, exception: Exception) -> None:
            raise ZeroDivisionError("oops")

    plugins = Plugins()
    plugins.register(Classifier(), name="classifier")
    plugins.register(AlsoBroken(), name="also-broken")
    plugins.register(Broken(), name="broken-one")
    outcome = engine.decide(plugins, make_run(), exception=ValueError())
    assert isinstance(outcome, engine.PluginFailure)
    assert "'also-broken'" in outcome.reason
    assert "'broken-one'" not in outcome.reason


def test_culprit_of_an_error_not_from_a_plugin() -> None:
    plugins = Plugins()
    plugins.register(Classifier(), name="classifier")
    try:
        raise ValueError("elsewhere")
    except ValueError as e:
        assert plugins.culprit(e) == "unknown plugin"


def test_a_raising_plugin_without_a_body_leaves_kopfs_decision(
    logger: logging.Logger, collector: Collector
) -> None:
    plugins = Plugins()
    plugins.register(Broken(), name="broken-one")
    run = make_run(logger, body=None, reason=None, handler_id="startup")
    assert engine.decide(plugins, run, result={"a": 1}) is None
    assert collector.pairs() == [(
        logging.ERROR,
        "Handler 'startup': plugin 'broken-one' failed: RuntimeError: classifier bug; "
        "Kopf's own decision stands.",
    )]


def test_a_classify_hook_producing_a_non_outcome_is_blamed_on_the_plugin_that_gave_it() -> None:
    class ClassifiesBadly:
        @hookimpl
        def kopf_outcomes_classify_result(self, run: HandlerRun, result: object) -> object:
            return "pending"

    class Innocent:  # implements the hook too, answers None: not to be named
        @hookimpl(tryfirst=True)
        def kopf_outcomes_classify_result(self, run: HandlerRun, result: object) -> object:
            return None

    plugins = Plugins()
    plugins.register(ClassifiesBadly(), name="bad")
    plugins.register(Innocent(), name="innocent")
    outcome = engine.decide(plugins, make_run(), result=None)
    assert isinstance(outcome, engine.PluginFailure)
    assert outcome.reason == ("plugin 'bad' failed: HookResultError: kopf_outcomes_classify_result produced "
                              "'pending', expected an Outcome (Success, Pending, Retry or Fatal); "
                              "the finalizer is kept")


def test_an_adjust_hook_setting_a_non_outcome_is_refused_in_its_own_frame() -> None:
    class AdjustsBadly:
        @hookimpl
        def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None:
            decision.outcome = "oops"  # type: ignore[assignment]

    class Innocent:
        @hookimpl(tryfirst=True)
        def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None:
            pass

    plugins = Plugins()
    plugins.register(AdjustsBadly(), name="bad")
    plugins.register(Innocent(), name="innocent")
    outcome = engine.decide(plugins, make_run(), result=None)
    assert isinstance(outcome, engine.PluginFailure)
    assert outcome.reason == ("plugin 'bad' failed: TypeError: decision.outcome must be an Outcome (Success, "
                              "Pending, Retry or Fatal), got 'oops'; the finalizer is kept")


def test_a_classify_exception_hook_producing_a_non_outcome() -> None:
    class Bad:
        @hookimpl
        def kopf_outcomes_classify_exception(self, run: HandlerRun, exception: Exception) -> object:
            return 42

    plugins = Plugins()
    plugins.register(Bad(), name="bad")
    outcome = engine.decide(plugins, make_run(), exception=ValueError())
    assert isinstance(outcome, engine.PluginFailure)
    assert "kopf_outcomes_classify_exception produced 42" in outcome.reason


# --- plugins: observation ----------------------------------------------------------------------


class Observer:
    def __init__(self) -> None:
        self.seen: list[tuple[str, Outcome]] = []

    @hookimpl
    def kopf_outcomes_observe_outcome(
        self, run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]
    ) -> None:
        self.seen.append((run.handler_id, outcome))
        patch.setdefault("status", {})["lastOutcome"] = type(outcome).__name__


def test_observers_get_the_final_outcome_and_may_add_to_the_patch() -> None:
    observer = Observer()
    plugins = Plugins()
    plugins.register(observer, name="observer")
    run = make_run()
    outcome = engine.decide(plugins, run, exception=Pending("waiting"))
    assert outcome == Pending("waiting")
    patch: dict[str, Any] = {"metadata": {"annotations": {"x": "y"}}}
    assert engine.observe(plugins, run, outcome, patch) is None
    assert observer.seen == [("h", Pending("waiting"))]
    assert patch == {"metadata": {"annotations": {"x": "y"}}, "status": {"lastOutcome": "Pending"}}


def test_observers_see_the_adjusted_outcome() -> None:
    class Escalate:
        @hookimpl
        def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None:
            decision.outcome = Fatal("escalated")

    observer = Observer()
    plugins = Plugins()
    plugins.register(observer, name="observer")
    plugins.register(Escalate(), name="escalate")
    run = make_run()
    outcome = engine.decide(plugins, run, exception=kopf.TemporaryError("x"))
    assert outcome is not None
    engine.observe(plugins, run, outcome, {})
    assert observer.seen == [("h", Fatal("escalated"))]


def test_a_raising_observer_is_a_plugin_failure() -> None:
    class BadObserver:
        @hookimpl
        def kopf_outcomes_observe_outcome(
            self, run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]
        ) -> None:
            raise OSError("metrics down")

    plugins = Plugins()
    plugins.register(BadObserver(), name="metrics")
    fallback = engine.observe(plugins, make_run(backoff=4), Success(), {})
    assert isinstance(fallback, engine.PluginFailure)
    assert fallback.level == logging.ERROR
    assert fallback.delay == 4
    assert fallback.reason.startswith("plugin 'metrics' failed: OSError: metrics down")


def test_observe_with_only_builtins_does_nothing() -> None:
    patch: dict[str, Any] = {}
    assert engine.observe(Plugins(), make_run(), Success(), patch) is None
    assert patch == {}


# --- the plugin manager ------------------------------------------------------------------------


class AdjustOnly:
    @hookimpl
    def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None: ...


class OptionsOnly:
    @hookimpl
    def kopf_outcomes_handler_options(
        self, handler_id: str, resource: ResourceRef | None
    ) -> HandlerOptions | None:
        return HandlerOptions(remember=True)


def test_only_builtins_tracks_registration() -> None:
    plugins = Plugins()
    assert plugins.decides_builtin and not plugins.observed
    plugins.register(AdjustOnly(), name="adjust")
    assert not (plugins.decides_builtin and not plugins.observed)
    plugins.unregister(name="adjust")
    assert plugins.decides_builtin and not plugins.observed


@pytest.mark.parametrize("hook", ["classify_result", "classify_exception", "observe_outcome"])
def test_any_decision_hook_leaves_the_hot_path(hook: str) -> None:
    impls: dict[str, Callable[..., None]] = {
        "classify_result": lambda self, run, result: None,
        "classify_exception": lambda self, run, exception: None,
        "observe_outcome": lambda self, run, outcome, patch: None,
    }
    plugin_class = type("P", (), {f"kopf_outcomes_{hook}": hookimpl(impls[hook])})
    plugins = Plugins()
    plugins.register(plugin_class(), name="p")
    assert not (plugins.decides_builtin and not plugins.observed)


def test_options_and_owned_fields_plugins_keep_the_hot_path() -> None:
    class Owner:
        @hookimpl
        def kopf_outcomes_owned_fields(self) -> Iterable[str]:
            return ["status.conditions"]

    plugins = Plugins()
    plugins.register(OptionsOnly(), name="options")
    plugins.register(Owner(), name="owner")
    assert plugins.decides_builtin and not plugins.observed


def test_options_merge_answers_field_by_field_first_wins() -> None:
    class First:
        @hookimpl(tryfirst=True)
        def kopf_outcomes_handler_options(
            self, handler_id: str, resource: ResourceRef | None
        ) -> HandlerOptions:
            return HandlerOptions(remember=False, depends_on=("spec.size",))

    class Second:
        @hookimpl(trylast=True)
        def kopf_outcomes_handler_options(
            self, handler_id: str, resource: ResourceRef | None
        ) -> HandlerOptions:
            return HandlerOptions(remember=True, explicit_completion=True)

    class Silent:
        @hookimpl
        def kopf_outcomes_handler_options(self, handler_id: str, resource: ResourceRef | None) -> None:
            return None

    plugins = Plugins()
    plugins.register(Second(), name="second")
    plugins.register(Silent(), name="silent")
    plugins.register(First(), name="first")
    assert plugins.options("h", KOPFEXAMPLES) == HandlerOptions(
        explicit_completion=True, depends_on=("spec.size",), remember=False
    )


def test_options_without_plugins_are_all_unset() -> None:
    assert Plugins().options("h", None) == HandlerOptions()


def test_options_are_cached_per_handler_and_resource_until_registration_changes() -> None:
    calls: list[tuple[str, ResourceRef | None]] = []

    class Counting:
        @hookimpl
        def kopf_outcomes_handler_options(
            self, handler_id: str, resource: ResourceRef | None
        ) -> HandlerOptions:
            calls.append((handler_id, resource))
            return HandlerOptions(explicit_completion=handler_id == "a")

    plugins = Plugins()
    plugins.register(Counting(), name="counting")
    for _ in range(3):
        assert plugins.options("a", KOPFEXAMPLES).explicit_completion is True
        assert plugins.options("b", KOPFEXAMPLES).explicit_completion is False
        assert plugins.options("a", None).explicit_completion is True
    assert calls == [("a", KOPFEXAMPLES), ("b", KOPFEXAMPLES), ("a", None)]
    plugins.register(AdjustOnly(), name="adjust")  # any registration invalidates the cache
    plugins.options("a", KOPFEXAMPLES)
    assert len(calls) == 4


def test_owned_fields_are_collected_and_cached() -> None:
    calls: list[str] = []

    class Conditions:
        @hookimpl
        def kopf_outcomes_owned_fields(self) -> Iterable[str]:
            calls.append("conditions")
            return ["status.conditions"]

    class Metrics:
        @hookimpl
        def kopf_outcomes_owned_fields(self) -> Iterable[str]:
            calls.append("metrics")
            return ("status.metrics", "metadata.labels.last-seen")

    plugins = Plugins()
    assert plugins.owned_fields() == ()
    plugins.register(Conditions(), name="conditions")
    plugins.register(Metrics(), name="metrics")
    owned = plugins.owned_fields()
    assert sorted(owned) == ["metadata.labels.last-seen", "status.conditions", "status.metrics"]
    assert plugins.owned_fields() == owned
    assert sorted(calls) == ["conditions", "metrics"]


def test_replace_swaps_the_plugin_under_a_name() -> None:
    plugins = Plugins()
    plugins.register(AdjustOnly(), name="slot")
    replacement = Classifier()
    plugins.replace(replacement, name="slot")
    assert plugins.get_plugin("slot") is replacement
    assert engine.decide(plugins, make_run(), exception=TimeoutError()) == Pending("waiting")
    plugins.replace(AdjustOnly(), name="new-slot")  # a free name is simply registered
    assert plugins.has_plugin("new-slot")


def test_handler_run_is_read_only() -> None:
    run = make_run()
    with pytest.raises(AttributeError):
        run.retry = 5  # type: ignore[misc]


# --- observers may add to the patch, never take a finalizer or the memory away ------------------


class FinalizerThief:
    @hookimpl
    def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]) -> None:
        patch.setdefault("metadata", {})["finalizers"] = []
        patch["metadata"].setdefault("annotations", {})["outcomes.kopf.zalando.org/memory"] = None
        patch.setdefault("status", {})["seen"] = True


def test_an_observer_that_changes_finalizers_or_memory_is_undone_and_named() -> None:
    plugins = Plugins()
    plugins.register(FinalizerThief(), name="thief")
    patch: dict[str, Any] = {"metadata": {"annotations": {"outcomes.kopf.zalando.org/memory": "{}"}}}
    fallback = engine.observe(plugins, make_run(), Success(), patch, ["outcomes.kopf.zalando.org/memory"])
    assert isinstance(fallback, PluginFailure)
    assert "plugin 'thief' failed" in fallback.reason and "finalizers" in fallback.reason
    assert "finalizers" not in patch["metadata"]
    assert patch["metadata"]["annotations"] == {"outcomes.kopf.zalando.org/memory": "{}"}
    assert "status" not in patch  # what it wrote goes too: the run is retried, what it told of did not happen


class Exiter:
    @hookimpl
    def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None:
        raise SystemExit(3)


def test_a_hook_raising_a_base_exception_is_contained() -> None:
    plugins = Plugins()
    plugins.register(Exiter(), name="exiter")
    outcome = engine.decide(plugins, make_run(), result=None)
    assert isinstance(outcome, PluginFailure)
    assert "plugin 'exiter' failed: SystemExit: 3" in outcome.reason


class StatusWriter:
    @hookimpl
    def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]) -> None:
        patch.setdefault("status", {})["writerSaw"] = str(outcome)
        patch.setdefault("metadata", {}).setdefault("annotations", {})["example.com/seen"] = "yes"

    @hookimpl
    def kopf_outcomes_owned_fields(self) -> Iterable[str]:
        raise RuntimeError("forgot how to answer")


def test_a_plugin_that_fails_to_name_its_fields_names_none(collector: Collector, logger: logging.Logger) -> None:
    """What it writes unnamed is in the digest its cycle remembers (tests/unit/test_own_writes.py)."""
    plugins = Plugins()
    plugins.register(StatusWriter(), name="writer")
    assert engine.observe(plugins, make_run(), Success(), {"status": {"h": "result"}}) is None
    assert engine.owned_fields(plugins, logger) == ()
    assert any("plugin 'writer' failed in kopf_outcomes_owned_fields" in m for m in collector.messages())


class ThiefThatFails:
    @hookimpl
    def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]) -> None:
        patch.setdefault("metadata", {})["finalizers"] = []
        raise RuntimeError("and then it broke")


@pytest.mark.parametrize("before", [{}, {"status": {"h": "result"}}], ids=["empty-patch", "filled-patch"])
def test_an_observer_that_takes_a_finalizer_and_then_fails_is_undone_too(before: dict[str, Any]) -> None:
    plugins = Plugins()
    plugins.register(ThiefThatFails(), name="thief")
    patch: dict[str, Any] = {key: dict(value) for key, value in before.items()}
    fallback = engine.observe(plugins, make_run(), Success(), patch)
    assert isinstance(fallback, PluginFailure) and "RuntimeError: and then it broke" in fallback.reason
    assert "finalizers" not in patch.get("metadata", {})


class Failing:
    @hookimpl
    def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]) -> None:
        raise RuntimeError("the metrics backend is down")


@pytest.mark.parametrize("before", [{}, {"status": {"h": "result", "writerSaw": "earlier"}}],
                         ids=["empty-patch", "filled-patch"])
def test_where_an_observer_fails_what_every_observer_wrote_is_undone(before: dict[str, Any]) -> None:
    """The run is retried: what the observers told of did not happen, and no status may say it did."""
    plugins = Plugins()
    plugins.register(Failing(), name="failing")
    plugins.register(StatusWriter(), name="writer")  # told first (pluggy calls the last registered first)
    patch: dict[str, Any] = {key: dict(value) for key, value in before.items()}
    fallback = engine.observe(plugins, make_run(), Success(), patch)
    assert isinstance(fallback, PluginFailure) and "the metrics backend is down" in fallback.reason
    assert patch == before


class FunctionPatch(dict[str, Any]):
    """Kopf's patch (1.44+) also carries patch functions, which may change anything in the body;
    like Kopf's, it keeps them in ``_fns`` and shows them as ``fns``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fns: list[Callable[[dict[str, Any]], None]] = []

    @property
    def fns(self) -> list[Callable[[dict[str, Any]], None]]:
        return self._fns

    def __bool__(self) -> bool:
        return len(self) > 0 or bool(self.fns)


class FunctionAdder:
    @hookimpl
    def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]) -> None:
        patch.fns.append(lambda body: body["metadata"].pop("finalizers", None))  # type: ignore[attr-defined]


@pytest.mark.parametrize("kept", [0, 1])
def test_an_observer_adding_patch_functions_is_undone_and_named(kept: int) -> None:
    plugins = Plugins()
    plugins.register(FunctionAdder(), name="adder")
    patch = FunctionPatch()
    patch.fns.extend(lambda body: None for _ in range(kept))  # Kopf's own, from before the observers
    existing = list(patch.fns)
    fallback = engine.observe(plugins, make_run(), Success(), patch)
    assert isinstance(fallback, PluginFailure) and "plugin 'adder' failed" in fallback.reason
    assert "patch function" in fallback.reason
    assert patch.fns == existing


@pytest.mark.skipif(not hasattr(kopf.Patch(), "fns"), reason="Kopf before 1.44 has no patch functions")
def test_a_patch_function_added_to_kopfs_own_patch_is_undone() -> None:
    """The guard reads Kopf's list of patch functions where Kopf keeps it, not through its property."""
    plugins = Plugins()
    plugins.register(FunctionAdder(), name="adder")
    patch = kopf.Patch()
    fallback = engine.observe(plugins, make_run(), Success(), patch)
    assert isinstance(fallback, PluginFailure) and "patch function" in fallback.reason
    assert patch.fns == [] and not patch


# --- observers are called as pluggy calls them ---------------------------------------------------


class Recorder:
    def __init__(self, name: str, calls: list[str]) -> None:
        self.name, self.calls = name, calls

    @hookimpl
    def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]) -> None:
        self.calls.append(self.name)


class First(Recorder):
    @hookimpl(tryfirst=True)
    def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]) -> None:
        self.calls.append(self.name)


class Last(Recorder):
    @hookimpl(trylast=True)
    def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]) -> None:
        self.calls.append(self.name)


class OnlyOutcome:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    @hookimpl
    def kopf_outcomes_observe_outcome(self, outcome: Outcome) -> None:  # a subset of the arguments
        self.calls.append(f"only-outcome:{type(outcome).__name__}")


class Wrapper:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    @hookimpl(wrapper=True)
    def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome,
                                      patch: MutableMapping[str, Any]) -> Any:
        self.calls.append("wrapper-before")
        result = yield
        self.calls.append("wrapper-after")
        return result


def _observer_order(plugins: Plugins, calls: list[str], extra: list[object]) -> list[str]:
    for index, plugin in enumerate([Last("last", calls), Recorder("a", calls), First("first", calls),
                                    Recorder("b", calls), OnlyOutcome(calls), *extra]):
        plugins.register(plugin, name=f"p{index}")
    engine.observe(plugins, make_run(), Success(), {})
    return calls


@pytest.mark.parametrize("extra", [[], ["wrapper"]], ids=["plain", "with-a-wrapper"])
def test_observers_are_called_in_pluggys_order_with_the_arguments_they_name(extra: list[str]) -> None:
    ours = _observer_order(Plugins(), [], [])
    calls: list[str] = []
    wrapped = _observer_order(Plugins(), calls, [Wrapper(calls)] if extra else [])
    # pluggy's own order: its hook caller, bypassing the direct dispatch.
    reference: list[str] = []
    plugins = Plugins()
    _observer_order(plugins, reference, [])
    reference.clear()
    plugins.hook.kopf_outcomes_observe_outcome(run=make_run(), outcome=Success(), patch={})
    assert ours == reference == ["first", "only-outcome:Success", "b", "a", "last"]
    assert wrapped == (["wrapper-before", *reference, "wrapper-after"] if extra else reference)


def test_pluggys_call_monitoring_still_sees_observers() -> None:
    plugins = Plugins()
    calls: list[str] = []
    plugins.register(Recorder("a", calls), name="a")
    seen: list[str] = []
    undo = plugins.add_hookcall_monitoring(lambda name, impls, kwargs: seen.append(name),
                                           lambda outcome, name, impls, kwargs: None)
    engine.observe(plugins, make_run(), Success(), {})
    undo()
    engine.observe(plugins, make_run(), Success(), {})
    assert seen == ["kopf_outcomes_observe_outcome"]
    assert calls == ["a", "a"]


def test_the_first_failing_observer_ends_the_call_as_in_pluggy() -> None:
    calls: list[str] = []

    class Failing:
        @hookimpl
        def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome,
                                          patch: MutableMapping[str, Any]) -> None:
            calls.append("failing")
            raise ValueError("boom")

    plugins = Plugins()
    plugins.register(Recorder("registered-first", calls), name="first")
    plugins.register(Failing(), name="failing")
    fallback = engine.observe(plugins, make_run(), Success(), {})
    assert calls == ["failing"]  # pluggy calls the later registered first, and stops at the failure
    assert isinstance(fallback, PluginFailure) and "plugin 'failing' failed" in fallback.reason


# --- what an observer may not do, done in odd ways ----------------------------------------------

MEMORY = "outcomes.kopf.zalando.org/memory"


class Meddler:
    """An observer that does ``meddle`` to the patch."""

    def __init__(self, meddle: Callable[[Any], None]) -> None:
        self.meddle = meddle

    @hookimpl
    def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]) -> None:
        self.meddle(patch)


def _uncopyable_finalizers(patch: Any) -> None:
    patch["metadata"]["finalizers"] = [threading.Lock()]


def _meddled(meddle: Callable[[Any], None], patch: Any) -> PluginFailure | None:
    plugins = Plugins()
    plugins.register(Meddler(meddle), name="meddler")
    return engine.observe(plugins, make_run(), Success(), patch, [MEMORY])


@pytest.mark.parametrize("meddle", [
    lambda patch: patch["metadata"].__setitem__("annotations", None),  # a merge patch's null: every annotation goes
    lambda patch: patch.__setitem__("metadata", None),
    lambda patch: patch.__setitem__("metadata", "x"),
    lambda patch: patch["metadata"].__setitem__("annotations", ["not", "a", "mapping"]),
    _uncopyable_finalizers,
], ids=["annotations-null", "metadata-null", "metadata-a-string", "annotations-a-list", "uncopyable-finalizers"])
def test_replacing_metadata_or_its_annotations_is_undone_with_kopfs_own_writes_kept(
        meddle: Callable[[Any], None]) -> None:
    """Kopf's own writes (its finalizer, its last-handled configuration) come back with our memory."""
    metadata = {"finalizers": ["kopf.zalando.org/KopfFinalizerMarker"],
                "annotations": {MEMORY: "{}", "kopf.zalando.org/last-handled-configuration": "{}"}}
    patch: dict[str, Any] = {"metadata": {key: type(value)(value) for key, value in metadata.items()}}
    fallback = _meddled(meddle, patch)
    assert isinstance(fallback, PluginFailure) and "plugin 'meddler' failed" in fallback.reason
    assert patch == {"metadata": metadata}


@pytest.mark.parametrize("meddle", [
    lambda patch: patch.__setitem__("metadata", None),
    lambda patch: patch.__setitem__("metadata", {"annotations": None}),
], ids=["metadata-null", "annotations-null"])
def test_an_empty_patch_made_to_delete_the_annotations_is_undone(meddle: Callable[[Any], None]) -> None:
    patch: dict[str, Any] = {}
    fallback = _meddled(meddle, patch)
    assert isinstance(fallback, PluginFailure)
    assert patch == {}


@pytest.mark.skipif(not hasattr(kopf.Patch(), "fns"), reason="Kopf before 1.44 has no patch functions")
@pytest.mark.parametrize("meddle", [
    lambda patch: patch.clear(),  # Kopf 1.44.6+ clears its patch functions too
    lambda patch: patch.fns.__setitem__(0, lambda body: body["metadata"].pop("finalizers", None)),
    lambda patch: setattr(patch, "_fns", [lambda body: None]),
], ids=["cleared", "one-replaced", "the-list-replaced"])
def test_kopfs_patch_functions_changed_in_any_way_are_put_back(meddle: Callable[[Any], None]) -> None:
    def kopfs_own(body: Any) -> None:
        return None

    patch = kopf.Patch(fns=[kopfs_own])
    functions = patch._fns
    fallback = _meddled(meddle, patch)
    assert isinstance(fallback, PluginFailure) and "patch functions" in fallback.reason
    assert patch._fns is functions and functions == [kopfs_own]


def test_patch_functions_made_up_on_a_patch_that_has_none_are_taken_away_not_shared() -> None:
    """A Kopf before 1.44 has no patch functions: one an observer makes up goes, and no list of
    ours is left on the patch for the next observer to fill."""

    class OldPatch(dict[str, Any]):
        pass

    patch = OldPatch()
    fallback = _meddled(lambda patch: setattr(patch, "_fns", [lambda body: None]), patch)
    assert isinstance(fallback, PluginFailure)
    assert not hasattr(patch, "_fns")
