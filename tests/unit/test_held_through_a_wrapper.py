"""
A held run spends none of the handler's ``retries=`` and none of its ``timeout=`` also where a tool
wraps Kopf's ``execute_handler_once`` after the patch (the cycle then calls through the tool's
wrapper, tests/unit/test_reaction.py). Found by the cut survey of issue 45: the step that undoes
the hold (``internals.unheld``) ran only on the cycle's own path, so behind a wrapper the holds
used up ``retries=`` or ``timeout=``, and once the plugin answered the handler was failed without
running: its deletion released the finalizer (or, retained, kept it for good).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kopf._core.actions import execution

from kopf_outcomes import HandlerOptions
from tests.unit.test_fail_closed import installed, on_delete
from tests.unit.test_review_failclosed import Aging, Flaky


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Aging:
    return Aging(monkeypatch)


def wrapped(tmp_path: Any, policy: str, plugin: Flaky) -> Iterator[list[str]]:
    """Installed, and then a tool's pass-through wrapper put around the patched function (taken
    out before uninstall() puts Kopf's own back); yields the handlers called through it."""
    for _ in installed(tmp_path, policy, plugin):
        patched, called = execution.execute_handler_once, []
        execution.execute_handler_once = passing(patched, called)
        try:
            yield called
        finally:
            execution.execute_handler_once = patched


def passing(patched: Callable[..., Any], called: list[str]) -> Callable[..., Any]:
    async def wrapper(**kwargs: Any) -> Any:
        called.append(str(kwargs["handler"].id))
        return await patched(**kwargs)
    return wrapper


async def test_holds_behind_a_wrapper_spend_no_retries_a_pending_handler_keeps_the_finalizer(
        server: Aging, tmp_path: Any, unpatched: None) -> None:
    runs: list[int] = []

    def not_done(**_: Any) -> bool:
        runs.append(1)
        return False
    plugin = Flaky(HandlerOptions(explicit_completion=True))
    for called in wrapped(tmp_path, "", plugin):
        await server.run(on_delete(not_done, retries=2), count=4)
        assert server.finalized and called  # held, through the wrapper
        held = len(runs)
        plugin.broken = False
        await server.run(on_delete(not_done, retries=2), count=3)
    assert server.finalized and len(runs) > held  # it ran again, and "not done" keeps the finalizer


@pytest.mark.parametrize("options, age", [({"retries": 2}, 1.0), ({"timeout": 60}, 100.0)], ids=["retries", "timeout"])
async def test_holds_behind_a_wrapper_spend_no_limit_the_handler_runs_once_the_plugin_answers(
        server: Aging, tmp_path: Any, unpatched: None, options: dict[str, Any], age: float) -> None:
    runs: list[int] = []

    def cleanup(**_: Any) -> None:
        runs.append(1)
    plugin = Flaky(HandlerOptions())
    for called in wrapped(tmp_path, 'fatal_on_delete = "retain"\n', plugin):
        await server.run(on_delete(cleanup, **options), count=4, age=age)
        assert server.finalized and called  # held, through the wrapper
        held = len(runs)
        plugin.broken = False
        await server.run(on_delete(cleanup, **options), count=3)
    assert len(runs) > held and not server.finalized  # it ran again and succeeded: released for that only
