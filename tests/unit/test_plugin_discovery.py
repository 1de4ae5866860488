"""Entry-point discovery: allow and deny lists, the environment variables, broken plugins."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import kopf_outcomes
from kopf_outcomes import Decision, HandlerRun, PluginError, hookimpl
from kopf_outcomes.manager import ENTRY_POINT_GROUP
from kopf_outcomes.manager import PluginManager as Plugins
from kopf_outcomes.plugins_cli import plugins as plugins_command


class Adjuster:
    @hookimpl
    def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None: ...


@dataclasses.dataclass
class FakeEntryPoint:
    name: str
    value: str
    loader: Callable[[], object]
    loads: int = 0
    dist: None = None

    def load(self) -> object:
        self.loads += 1
        return self.loader()


def broken_import() -> object:
    raise ImportError("No module named 'missing_dependency'")


@pytest.fixture
def entry_points(monkeypatch: pytest.MonkeyPatch) -> dict[str, FakeEntryPoint]:
    """Three installed plugins, a, b and c, as importlib.metadata would list them."""
    found = {
        name: FakeEntryPoint(name, f"plugin_{name}:Plugin", Adjuster) for name in ("a", "b", "c")
    }
    groups: list[str] = []

    def fake_entry_points(*, group: str) -> list[FakeEntryPoint]:
        groups.append(group)
        assert group == ENTRY_POINT_GROUP
        return list(found.values())

    monkeypatch.setattr("kopf_outcomes.manager.metadata.entry_points", fake_entry_points)
    return found


def registered(plugins: Plugins) -> set[str]:
    return {name for name, _ in plugins.list_name_plugin() if name != "kopf_outcomes.builtin"}


def test_all_installed_plugins_load_by_default(entry_points: dict[str, FakeEntryPoint]) -> None:
    plugins = Plugins()
    assert plugins.load_entry_points() == ["a", "b", "c"]
    assert registered(plugins) == {"a", "b", "c"}
    assert not (plugins.decides_builtin and not plugins.observed)


def test_allow_list(entry_points: dict[str, FakeEntryPoint]) -> None:
    plugins = Plugins()
    assert plugins.load_entry_points(allow=["a", "c", "not-installed"]) == ["a", "c"]
    assert registered(plugins) == {"a", "c"}
    assert entry_points["b"].loads == 0  # not even imported


def test_empty_allow_list_loads_nothing(entry_points: dict[str, FakeEntryPoint]) -> None:
    plugins = Plugins()
    assert plugins.load_entry_points(allow=[]) == []
    assert plugins.decides_builtin and not plugins.observed


def test_deny_list(entry_points: dict[str, FakeEntryPoint]) -> None:
    plugins = Plugins()
    assert plugins.load_entry_points(deny=["b"]) == ["a", "c"]
    assert entry_points["b"].loads == 0


def test_deny_wins_over_allow(entry_points: dict[str, FakeEntryPoint]) -> None:
    assert Plugins().load_entry_points(allow=["a", "b"], deny=["a"]) == ["b"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [("a", ["a"]), ("a, c", ["a", "c"]), (" c ,, b ", ["b", "c"]), ("", []), (" , ", [])],
)
def test_env_allow_list(
    entry_points: dict[str, FakeEntryPoint], monkeypatch: pytest.MonkeyPatch,
    value: str, expected: list[str],
) -> None:
    monkeypatch.setenv("KOPF_OUTCOMES_PLUGINS", value)
    assert Plugins().load_entry_points() == expected


def test_explicit_allow_list_overrides_the_env_one(
    entry_points: dict[str, FakeEntryPoint], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KOPF_OUTCOMES_PLUGINS", "a")
    assert Plugins().load_entry_points(allow=["b"]) == ["b"]


def test_env_deny_list_adds_to_the_given_one(
    entry_points: dict[str, FakeEntryPoint], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KOPF_OUTCOMES_DISABLE_PLUGINS", "a")
    assert Plugins().load_entry_points() == ["b", "c"]
    assert Plugins().load_entry_points(deny=["c"]) == ["b"]


def test_env_deny_list_wins_over_env_allow_list(
    entry_points: dict[str, FakeEntryPoint], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KOPF_OUTCOMES_PLUGINS", "a,b")
    monkeypatch.setenv("KOPF_OUTCOMES_DISABLE_PLUGINS", "b")
    assert Plugins().load_entry_points() == ["a"]


def test_a_plugin_that_fails_to_load_is_a_plugin_error_naming_it(
    entry_points: dict[str, FakeEntryPoint],
) -> None:
    entry_points["b"] = FakeEntryPoint("b", "plugin_b:Plugin", broken_import)
    with pytest.raises(PluginError) as info:
        Plugins().load_entry_points()
    assert str(info.value) == (
        "kopf-outcomes plugin 'b' (plugin_b:Plugin) failed to load: "
        "ImportError: No module named 'missing_dependency'"
    )
    assert isinstance(info.value.__cause__, ImportError)


def test_a_broken_plugin_can_be_denied(entry_points: dict[str, FakeEntryPoint]) -> None:
    entry_points["b"] = FakeEntryPoint("b", "plugin_b:Plugin", broken_import)
    assert Plugins().load_entry_points(deny=["b"]) == ["a", "c"]


def test_a_plugin_with_invalid_hooks_is_not_silently_accepted(
    entry_points: dict[str, FakeEntryPoint],
) -> None:
    class Misspelt:
        @hookimpl
        def kopf_outcomes_adjust_outcome(self, run: Any, decision: Any, extra: Any) -> None: ...

    entry_points["b"] = FakeEntryPoint("b", "plugin_b:Plugin", Misspelt)
    # Ours, not pluggy's raw PluginValidationError: the plugin, the hook, and what it passes.
    plugins = Plugins()
    with pytest.raises(PluginError) as info:
        plugins.load_entry_points(allow=["b"])
    assert str(info.value) == (
        "kopf-outcomes plugin 'b' cannot be used: its function 'kopf_outcomes_adjust_outcome' "
        f"({at(Misspelt.kopf_outcomes_adjust_outcome)}), marked as kopf_outcomes_adjust_outcome, takes 'extra', "
        "which the hook does not pass; it passes run, decision (take any of them, by these names)")
    assert not plugins.has_plugin("b") and plugins.decides_builtin and not plugins.observed  # nothing of it registered


def test_loading_twice_registers_each_plugin_once(entry_points: dict[str, FakeEntryPoint]) -> None:
    plugins = Plugins()
    assert plugins.load_entry_points(allow=["a"]) == ["a"]
    assert plugins.load_entry_points() == ["b", "c"]
    assert plugins.load_entry_points() == []
    assert entry_points["a"].loads == 1


def test_blocked_plugins_are_not_loaded(entry_points: dict[str, FakeEntryPoint]) -> None:
    plugins = Plugins()
    plugins.set_blocked("c")
    assert plugins.load_entry_points() == ["a", "b"]
    assert entry_points["c"].loads == 0


# --- plugins that cannot be used are refused at registration, named ----------------------------


class Misspelled:
    @hookimpl
    def kopf_outcomes_observe_outcomes(self, run: Any, outcome: Any, patch: Any) -> None: ...


class Asynchronous:
    @hookimpl
    async def kopf_outcomes_observe_outcome(self, run: Any, outcome: Any, patch: Any) -> None: ...


class FarOff:
    @hookimpl
    def kopf_outcomes_frobnicate(self) -> None: ...


class HalfGood:  # a good hook beside a bad one: neither may stay registered
    @hookimpl
    def kopf_outcomes_observe_outcome(self, outcome: Any) -> None: ...

    @hookimpl
    def kopf_outcomes_classify_exception(self, run: Any, exc: Any) -> Any: ...


def at(function: Any) -> str:
    """Where a function of this file is, as the refusals name it: the file, and the line of its first decorator."""
    return f"{THIS_FILE}:{function.__code__.co_firstlineno}"


THIS_FILE = "tests/unit/test_plugin_discovery.py"


@pytest.mark.parametrize(("plugin", "message"), [
    (Misspelled(), "kopf-outcomes plugin 'misspelled' cannot be used: its function 'kopf_outcomes_observe_outcomes' "
                   f"({at(Misspelled.kopf_outcomes_observe_outcomes)}) "
                   "is marked as a hook implementation, but there is no hook 'kopf_outcomes_observe_outcomes' "
                   "(did you mean 'kopf_outcomes_observe_outcome'?)"),
    (FarOff(), "kopf-outcomes plugin 'faroff' cannot be used: its function 'kopf_outcomes_frobnicate' "
               f"({at(FarOff.kopf_outcomes_frobnicate)}) is marked as a "
               "hook implementation, but there is no hook 'kopf_outcomes_frobnicate' (the hooks are "
               "kopf_outcomes_adjust_outcome, kopf_outcomes_classify_exception, kopf_outcomes_classify_result, "
               "kopf_outcomes_handler_options, kopf_outcomes_object_gone, kopf_outcomes_observe_object, "
               "kopf_outcomes_observe_outcome, kopf_outcomes_owned_fields)"),
    (HalfGood(), "kopf-outcomes plugin 'halfgood' cannot be used: its function 'kopf_outcomes_classify_exception' "
                 f"({at(HalfGood.kopf_outcomes_classify_exception)}), marked as kopf_outcomes_classify_exception, "
                 "takes 'exc', which the hook does not pass; it passes run, exception (take any of them, by these "
                 "names)"),
    (Asynchronous(), "kopf-outcomes plugin 'asynchronous': its function 'kopf_outcomes_observe_outcome' "
                     f"({at(Asynchronous.kopf_outcomes_observe_outcome)}) implements kopf_outcomes_observe_outcome "
                     "as 'async def'; hooks run inside Kopf's event loop and must be plain, quick functions. Do slow "
                     "work elsewhere (a Kopf daemon, a thread, a queue the hook only appends to)."),
])
def test_an_unusable_plugin_is_refused_with_its_name(plugin: object, message: str) -> None:
    manager = Plugins()
    with pytest.raises(PluginError) as info:
        manager.register(plugin, name=type(plugin).__name__.lower())
    assert str(info.value) == message
    assert not manager.is_registered(plugin)
    assert manager.decides_builtin and not manager.observed  # nothing of it stays behind


def test_a_hook_named_by_specname_is_checked_by_that_name() -> None:
    class Renamed:
        @hookimpl(specname="kopf_outcomes_clasify_result")
        def classify(self, run: Any, result: Any) -> Any: ...

    with pytest.raises(PluginError) as info:
        Plugins().register(Renamed(), name="renamed")
    assert str(info.value) == (
        f"kopf-outcomes plugin 'renamed' cannot be used: its function 'classify' ({at(Renamed.classify)}, specname "
        "'kopf_outcomes_clasify_result') is marked as a hook implementation, but there is no hook "
        "'kopf_outcomes_clasify_result' (did you mean 'kopf_outcomes_classify_result'?)")


def test_install_refuses_an_unusable_plugin_and_patches_nothing(unpatched: None) -> None:
    with pytest.raises(PluginError, match="'async def'"):
        kopf_outcomes.install(entry_points=False, plugins=[Asynchronous()])
    assert not kopf_outcomes.is_installed()


def test_the_plugins_command_lists_the_hooks_and_marks_a_broken_plugin(
        entry_points: dict[str, FakeEntryPoint]) -> None:
    entry_points["b"] = FakeEntryPoint("b", "plugin_b:Plugin", Misspelled)
    result = CliRunner().invoke(plugins_command, [])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert ("  b                        BROKEN, not loaded: kopf-outcomes plugin 'b' cannot be used: its function "
            f"'kopf_outcomes_observe_outcomes' ({at(Misspelled.kopf_outcomes_observe_outcomes)}) is marked as a "
            "hook implementation, but there is no hook 'kopf_outcomes_observe_outcomes' "
            "(did you mean 'kopf_outcomes_observe_outcome'?)") in lines
    hooks = lines[lines.index("Hooks, each with its plugins in the order they are called:"):]
    adjust = hooks.index("  kopf_outcomes_adjust_outcome")
    assert hooks[adjust + 1:adjust + 4] == ["    c", "    a", "  kopf_outcomes_observe_outcome"]
    assert result.stderr == ("Error: 1 plugin(s) cannot be used, an operator would not start: b (see above)\n")


def test_kopf_run_shows_the_one_line_reason_of_an_unusable_plugin(tmp_path: Path) -> None:
    operator = tmp_path / "operator.py"
    operator.write_text("import kopf_outcomes\n\n"
                        "class Misspelled:\n"
                        "    @kopf_outcomes.hookimpl\n"
                        "    def kopf_outcomes_classify_exceptions(self, run, exception):\n"
                        "        return None\n\n"
                        "kopf_outcomes.install(entry_points=False, plugins=[Misspelled()])\n")
    done = subprocess.run([str(Path(sys.executable).parent / "kopf"), "run", "--standalone", str(operator)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr == (
        "PluginError: kopf-outcomes plugin '__kopf_script_0__" + str(operator) + ".Misspelled' cannot be used: "
        "its function 'kopf_outcomes_classify_exceptions' (operator.py:4) is marked as a hook implementation, but "
        "there is no hook "
        "'kopf_outcomes_classify_exceptions' (did you mean 'kopf_outcomes_classify_exception'?)\n")


def test_what_pluggy_alone_refuses_is_a_plugin_error_naming_the_plugin_too() -> None:
    class NotAGenerator:
        @hookimpl(wrapper=True)
        def kopf_outcomes_adjust_outcome(self, run: Any, decision: Any) -> None: ...

    manager = Plugins()
    with pytest.raises(PluginError) as info:
        manager.register(NotAGenerator(), name="wrapper")
    assert str(info.value) == (
        "kopf-outcomes plugin 'wrapper' cannot be used: Plugin 'wrapper' for hook 'kopf_outcomes_adjust_outcome'; "
        "hookimpl definition: kopf_outcomes_adjust_outcome(run: 'Any', decision: 'Any') -> 'None'; "
        "Declared as wrapper=True or hookwrapper=True but function is not a generator function")
    assert not manager.has_plugin("wrapper") and manager.decides_builtin and not manager.observed


def test_a_blocked_broken_plugin_is_not_refused_but_left_out_as_pluggy_does() -> None:
    manager = Plugins()
    manager.set_blocked("misspelled")
    assert manager.register(Misspelled(), name="misspelled") is None
    assert not manager.has_plugin("misspelled")


# --- the same plugin found twice is registered once (issue 44, finding 11) -----------------------


SHARED = Adjuster()  # one plugin object, as an entry point's module is one module


def test_a_plugin_found_by_its_entry_point_and_given_to_install_is_registered_once(
        entry_points: dict[str, FakeEntryPoint], unpatched: None) -> None:
    """pluggy's raw multi-line ValueError ("Plugin already registered under a different name")
    made the first install() raise; the operator did not start."""
    entry_points.clear()
    entry_points["a"] = FakeEntryPoint("a", "plugin_a:SHARED", lambda: SHARED)
    manager = kopf_outcomes.install(plugins=[SHARED])
    assert [name for name, plugin in manager.list_name_plugin() if plugin is SHARED] == ["a"]
    assert kopf_outcomes.is_installed()


def test_a_plugin_given_twice_is_registered_once(unpatched: None) -> None:
    other = Adjuster()
    manager = kopf_outcomes.install(entry_points=False, plugins=[other, other])
    assert [plugin for _, plugin in manager.list_name_plugin()].count(other) == 1
    kopf_outcomes.install(plugins=[other])  # again, on the installation made
    assert [plugin for _, plugin in manager.list_name_plugin()].count(other) == 1


def test_another_plugin_under_a_name_taken_is_one_plugin_error_line() -> None:
    manager = Plugins()
    manager.register(Adjuster(), name="quiet")
    with pytest.raises(PluginError) as info:
        manager.register(Adjuster(), name="quiet")
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("kopf-outcomes plugin 'quiet' cannot be used: another plugin is registered "
                                      "under that name (")


# --- a broken plugin names its function and line (issue 44, finding 13) --------------------------


def test_a_broken_typed_hook_names_its_function_and_line_whatever_its_name() -> None:
    """The message named the hook only; with a typed marker the function may have any name."""
    from kopf_outcomes import hooks

    @hooks.observe_outcome
    def record_for_the_audit(run: Any, outcome: Any, patch: Any, extra: Any) -> None: ...

    plugin = types.ModuleType("audit_plugin")
    plugin.record_for_the_audit = record_for_the_audit  # type: ignore[attr-defined]
    with pytest.raises(PluginError) as info:
        Plugins().register(plugin)
    assert str(info.value) == (
        "kopf-outcomes plugin 'audit_plugin' cannot be used: its function 'record_for_the_audit' "
        f"({at(record_for_the_audit)}), marked as kopf_outcomes_observe_outcome, takes 'extra', which the hook "
        "does not pass; it passes run, outcome, patch (take any of them, by these names)")
