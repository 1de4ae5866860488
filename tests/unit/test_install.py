"""Installing the patch: idempotent, exactly undone, refused on an untested Kopf or a bad policy."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kopf._cogs.structs import finalizers
from kopf._core.reactor import queueing

import kopf_outcomes
from kopf_outcomes import Decision, HandlerRun, hookimpl, installation, options
from kopf_outcomes.manager import PluginManager as Plugins
from kopf_outcomes.policy import PolicyError
from tests.unit.kopf_objects import application, execution

PATCHED = [
    (execution, "execute_handler_once"),
    (execution, "execute_handlers_once"),
    (execution, "invoke_handler"),
    (application, "apply"),
    (queueing, "worker"),
    (queueing, "watcher"),
    (finalizers, "allow_deletion"),
]


def wrappers() -> list[Any]:
    """The current installation's wrappers, in the order of PATCHED."""
    assert installation._patch is not None
    return [getattr(installation._patch, name) for _, name in PATCHED]


def kopfs_functions() -> list[Any]:
    return [getattr(module, name) for module, name in PATCHED]


@pytest.fixture(autouse=True)
def _always_uninstalled(unpatched: None) -> Iterator[None]:
    yield


@pytest.fixture
def stock() -> list[Any]:
    """Kopf's own functions, as they are before any patching."""
    functions = kopfs_functions()
    assert not any(getattr(f, "__module__", None) == "kopf_outcomes._kopf.wrappers" for f in functions)
    return functions


class Adjuster:
    @hookimpl
    def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None: ...


def assert_unpatched(stock: list[Any]) -> None:
    assert all(now is before for now, before in zip(kopfs_functions(), stock, strict=True))
    with pytest.raises(RuntimeError):
        kopf_outcomes.plugin_manager()


def test_install_patches_all_four_functions(stock: list[Any]) -> None:
    plugins = kopf_outcomes.install(entry_points=False)
    assert isinstance(plugins, Plugins)
    assert kopfs_functions() == wrappers()
    assert kopf_outcomes.plugin_manager() is plugins


def test_uninstall_restores_kopfs_functions_exactly(stock: list[Any]) -> None:
    kopf_outcomes.install(entry_points=False)
    kopf_outcomes.uninstall()
    assert_unpatched(stock)


def test_uninstall_is_idempotent(stock: list[Any]) -> None:
    kopf_outcomes.uninstall()
    kopf_outcomes.install(entry_points=False)
    kopf_outcomes.uninstall()
    kopf_outcomes.uninstall()
    assert_unpatched(stock)


def test_install_is_idempotent(stock: list[Any]) -> None:
    first = kopf_outcomes.install(entry_points=False)
    second = kopf_outcomes.install(entry_points=False)
    assert second is first
    assert kopfs_functions() == wrappers()
    kopf_outcomes.uninstall()  # one uninstall undoes both: nothing was wrapped twice
    assert_unpatched(stock)


def test_a_second_install_registers_extra_plugins_only_once() -> None:
    plugin = Adjuster()
    plugins = kopf_outcomes.install(entry_points=False, plugins=[plugin])
    assert kopf_outcomes.install(entry_points=False, plugins=[plugin]) is plugins
    other = Adjuster()
    assert kopf_outcomes.install(entry_points=False, plugins=[plugin, other]) is plugins
    registered = plugins.get_plugins()
    assert sum(p is plugin for p in registered) == 1
    assert sum(p is other for p in registered) == 1
    assert not (plugins.decides_builtin and not plugins.observed)


def test_reinstall_after_uninstall_starts_afresh() -> None:
    first = kopf_outcomes.install(entry_points=False, plugins=[Adjuster()])
    kopf_outcomes.uninstall()
    second = kopf_outcomes.install(entry_points=False)
    assert second is not first
    assert second.decides_builtin and not second.observed


def test_installed_without_install_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError) as info:
        kopf_outcomes.plugin_manager()
    assert str(info.value) == (
        "kopf-outcomes is not installed: call kopf_outcomes.install() first"
    )


def test_install_discovers_entry_points_through_the_plugin_manager(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[dict[str, Any]] = []

    def fake_load(self: Plugins, **kwargs: Any) -> list[str]:
        seen.append(kwargs)
        return []

    monkeypatch.setattr(Plugins, "load_entry_points", fake_load)
    kopf_outcomes.install(allow=["a"], deny=["b"])
    assert seen == [{"allow": ["a"], "deny": ["b"]}]
    kopf_outcomes.uninstall()
    kopf_outcomes.install(entry_points=False)
    assert len(seen) == 1


# --- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.36.0", "1.46.0", "0.99", "2.0.0"])
def test_unsupported_kopf_version_is_refused(
    version: str, monkeypatch: pytest.MonkeyPatch, stock: list[Any]
) -> None:
    monkeypatch.setattr("kopf_outcomes._kopf.internals.metadata.version", lambda name: version)
    with pytest.raises(kopf_outcomes.UnsupportedKopfError) as info:
        kopf_outcomes.install(entry_points=False)
    message = str(info.value)
    assert f"Kopf {version} is installed" in message
    assert "supports Kopf 1.37 to 1.45.x" in message
    assert_unpatched(stock)


def test_unreadable_kopf_version_is_refused(
    monkeypatch: pytest.MonkeyPatch, stock: list[Any]
) -> None:
    monkeypatch.setattr("kopf_outcomes._kopf.internals.metadata.version", lambda name: "garbage")
    with pytest.raises(kopf_outcomes.UnsupportedKopfError) as info:
        kopf_outcomes.install(entry_points=False)
    assert str(info.value).startswith("kopf-outcomes cannot read the Kopf version 'garbage'; ")
    assert_unpatched(stock)


@pytest.mark.parametrize("version", ["1.37.0", "1.45.2", "1.45.99", "1.40.0rc1"])
def test_supported_kopf_versions_are_accepted(version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def fake_version(name: str) -> str:
        asked.append(name)
        return version

    monkeypatch.setattr("kopf_outcomes._kopf.internals.metadata.version", fake_version)
    kopf_outcomes.install(entry_points=False)
    assert asked == ["kopf"]
    assert execution.execute_handler_once == wrappers()[0]


def test_an_invalid_policy_is_refused_before_patching(tmp_path: Path, stock: list[Any]) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text("delay = -1\n", encoding="utf-8")
    with pytest.raises(PolicyError) as info:
        kopf_outcomes.install(entry_points=False, policy=policy)
    assert str(policy) in str(info.value)
    assert "delay" in str(info.value)
    assert_unpatched(stock)


def test_an_invalid_policy_from_the_environment_is_refused_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stock: list[Any]
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text("delay = -1\n", encoding="utf-8")
    monkeypatch.setenv("KOPF_OUTCOMES_POLICY", str(policy))
    with pytest.raises(PolicyError):
        kopf_outcomes.install(entry_points=False)
    assert_unpatched(stock)


def test_an_invalid_policy_leaves_an_existing_installation_as_it_was(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.toml", tmp_path / "bad.toml"
    good.write_text("delay = 5\n", encoding="utf-8")
    bad.write_text("delay = -1\n", encoding="utf-8")
    plugins = kopf_outcomes.install(entry_points=False, policy=good)
    before = plugins.get_plugin("kopf_outcomes.policy")
    assert before is not None
    with pytest.raises(PolicyError):
        kopf_outcomes.install(entry_points=False, policy=bad)
    assert kopf_outcomes.plugin_manager() is plugins
    assert plugins.get_plugin("kopf_outcomes.policy") is before
    assert execution.execute_handler_once == wrappers()[0]


def test_a_kopf_whose_invoke_handler_has_other_parameters_gets_them_passed_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The wrapper names Kopf's parameters (1.37-1.45) one by one; a Kopf with others (a newer
    one, opted in) gets the wrapper that passes whatever Kopf gives."""
    received: list[dict[str, Any]] = []

    async def invoke_handler(*, handler: Any, cause: Any, retry: int, newer: str, **rest: Any) -> str:
        received.append({"retry": retry, "newer": newer, **rest})
        return "the handler's result"

    monkeypatch.setattr(execution, "invoke_handler", invoke_handler)
    # Options that other tests' modules declared (process-wide) would be read of this stand-in handler.
    declared = set(options.declared)
    options.declared.clear()
    try:
        kopf_outcomes.install(entry_points=False)
        assert installation._patch is not None
        assert execution.invoke_handler == installation._patch.invoke_handler_any
        result = asyncio.run(execution.invoke_handler(handler=object(), cause=object(), retry=2, newer="given",
                                                      settings=None, subrefs=set()))
    finally:
        options.declared.update(declared)
    assert result == "the handler's result"
    assert received == [{"retry": 2, "newer": "given", "settings": None, "subrefs": set()}]
    kopf_outcomes.uninstall()
    assert execution.invoke_handler is invoke_handler


def test_kopfs_own_invoke_handler_gets_the_wrapper_that_names_its_parameters(stock: list[Any]) -> None:
    kopf_outcomes.install(entry_points=False)
    assert installation._patch is not None
    assert execution.invoke_handler == installation._patch.invoke_handler


def test_plugins_given_to_install_are_asked_before_the_policy() -> None:
    """docs/policies.md: plugins passed as ``install(plugins=[...])`` are asked before the policy.
    A classifier given there that fails must be asked (and so contained: a Retry, the finalizer
    kept), not passed over by the policy's Fatal, which released (found by tests/histories)."""
    from kopf_outcomes.policy import ExceptionRule, Policy, Scope

    class Given:
        @hookimpl
        def kopf_outcomes_classify_exception(self, run: HandlerRun, exception: BaseException) -> None:
            return None

    given = Given()
    policy = Policy(defaults=Scope(exceptions={"builtins.ValueError": ExceptionRule(outcome="fatal")}))
    try:
        manager = kopf_outcomes.install(entry_points=False, events=False, policy=policy, plugins=[given])
        order = [impl.plugin_name for impl in reversed(manager.hook.kopf_outcomes_classify_exception.get_hookimpls())]
        assert order.index(manager.get_name(given)) < order.index("kopf_outcomes.policy"), order
    finally:
        kopf_outcomes.uninstall()
