"""Entry-point discovery: allow and deny lists, the environment variables, broken plugins."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pluggy
import pytest

import kopf_outcomes
from kopf_outcomes import Decision, HandlerRun, PluginError, hookimpl
from kopf_outcomes.manager import ENTRY_POINT_GROUP
from kopf_outcomes.manager import PluginManager as Plugins


class Adjuster:
    @hookimpl
    def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None: ...


@dataclasses.dataclass
class FakeEntryPoint:
    name: str
    value: str
    loader: Callable[[], object]
    loads: int = 0

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
    assert plugins.only_builtins is False


def test_allow_list(entry_points: dict[str, FakeEntryPoint]) -> None:
    plugins = Plugins()
    assert plugins.load_entry_points(allow=["a", "c", "not-installed"]) == ["a", "c"]
    assert registered(plugins) == {"a", "c"}
    assert entry_points["b"].loads == 0  # not even imported


def test_empty_allow_list_loads_nothing(entry_points: dict[str, FakeEntryPoint]) -> None:
    plugins = Plugins()
    assert plugins.load_entry_points(allow=[]) == []
    assert plugins.only_builtins is True


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
    # pluggy's own validation error; it names the plugin and the unknown argument.
    with pytest.raises(pluggy.PluginValidationError, match=r"(?s)Plugin 'b'.*'extra'"):
        Plugins().load_entry_points(allow=["b"])


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


@pytest.mark.parametrize(("plugin", "message"), [
    (Misspelled(), r"plugin 'misspelled' cannot be used: .*unknown hook 'kopf_outcomes_observe_outcomes'"),
    (Asynchronous(), r"plugin 'asynchronous' implements kopf_outcomes_observe_outcome as 'async def'"),
])
def test_an_unusable_plugin_is_refused_with_its_name(plugin: object, message: str) -> None:
    manager = Plugins()
    with pytest.raises(PluginError, match=message):
        manager.register(plugin, name=type(plugin).__name__.lower())
    assert not manager.is_registered(plugin)
    assert manager.only_builtins  # nothing of it stays behind


def test_install_refuses_an_unusable_plugin_and_patches_nothing(unpatched: None) -> None:
    with pytest.raises(PluginError, match="'async def'"):
        kopf_outcomes.install(entry_points=False, plugins=[Asynchronous()])
    assert not kopf_outcomes.is_installed()
