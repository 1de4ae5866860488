"""
A pytest plugin for Kopf's own test suite: keeps ``kopf_outcomes.install()`` active for every test.

Loaded with ``-p kopf_parity_plugin`` by ``run.py`` for the patched run only. It proves that the
patch was really active: before and after every test it checks that Kopf's patched functions are
kopf-outcomes' wrappers, re-installs if a test restored Kopf, and counts what it saw; at the end it
writes a JSON summary for ``run.py``, which fails the job on any inactive check.

``KOPF_PARITY_BREAK`` (test-only) breaks the patch on purpose, to show that the job catches it:
``retry-delay`` adds one second to every retry; ``uninstalled`` does not install at all.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import os
from typing import Any

import pytest
from kopf._core.actions import application, execution
from kopf._core.reactor import queueing

PATCHED = ((execution, "invoke_handler"), (execution, "execute_handler_once"),
           (execution, "execute_handlers_once"), (application, "apply"), (queueing, "worker"))

_stats: dict[str, Any] = {"checks": 0, "inactive": [], "reinstalled": [], "break": ""}


def _ours(function: Any) -> bool:
    return bool(getattr(inspect.unwrap(function), "__module__", "").startswith("kopf_outcomes"))


def _inactive() -> list[str]:
    return [f"{module.__name__}.{name}" for module, name in PATCHED if not _ours(getattr(module, name))]


def _install() -> None:
    import kopf_outcomes

    mode = os.environ.get("KOPF_PARITY_BREAK", "")
    _stats["break"] = mode
    if mode == "uninstalled":
        return
    kopf_outcomes.install(entry_points=False)
    if mode == "retry-delay":
        _break_retries()
    elif mode:
        raise pytest.UsageError(f"KOPF_PARITY_BREAK={mode!r}: expected 'retry-delay' or 'uninstalled'")


def _break_retries() -> None:
    """Wrap the wrapper: every unfinished outcome waits one second more than it should."""
    patched = execution.execute_handler_once

    @functools.wraps(patched)
    async def execute_handler_once(*args: Any, **kwargs: Any) -> Any:
        outcome = await patched(*args, **kwargs)
        if not outcome.final:
            outcome = dataclasses.replace(outcome, delay=(outcome.delay or 0) + 1.0)
        return outcome

    execution.execute_handler_once = execute_handler_once


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("KOPF_OUTCOMES_PLUGINS", None) != "":
        raise pytest.UsageError('the patched run needs KOPF_OUTCOMES_PLUGINS="" (no installed plugins)')
    if os.environ.get("KOPF_OUTCOMES_POLICY"):
        raise pytest.UsageError("the patched run needs no policy: unset KOPF_OUTCOMES_POLICY")
    _install()


def _check(nodeid: str, when: str) -> None:
    _stats["checks"] += 1
    inactive = _inactive()
    if inactive:
        _stats["inactive"].append(f"{nodeid} ({when}): {', '.join(inactive)}")
        if _stats["break"] != "uninstalled":  # keep the patch on for the tests that follow
            import kopf_outcomes

            kopf_outcomes.uninstall()
            _install()
            _stats["reinstalled"].append(nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    _check(item.nodeid, "before")
    try:
        return (yield)
    finally:
        _check(item.nodeid, "after")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get("KOPF_PARITY_STATS")
    if path:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{path}.{worker}.json", "w") as file:
            json.dump(_stats, file)
