"""The HandlerRun that hooks get: read from Kopf's objects when a hook asks, a HandlerRun otherwise."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import HandlerOptions, HandlerRun, ResourceRef
from kopf_outcomes._kopf import kopf_runs as runs
from kopf_outcomes._kopf.internals import runtime_of
from kopf_outcomes.kinds import Kind
from kopf_outcomes.manager import PluginManager
from tests.unit.kopf_objects import changing_cause, handler, state_for

BODY: dict[str, Any] = {
    "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
    "metadata": {"name": "example", "namespace": "default", "uid": "uid-1",
                 "deletionTimestamp": "2024-01-01T00:00:00Z"},
}
PREVIOUS: Any = {"outcome": "pending", "reason": "waiting", "digest": "d"}


def build(logger: logging.Logger, plugins: PluginManager | None = None, **handler_options: Any) -> HandlerRun:
    the_handler = handler(lambda **_: None, **handler_options)
    state = state_for([the_handler])[the_handler.id]
    return runs.build(plugins or PluginManager(), Kind.CHANGE, the_handler, changing_cause(BODY, logger), 2, state,
                      kopf.OperatorSettings(), PREVIOUS)


class Classifier:
    """A plugin that decides (and leaves every run to the built-ins): the caller's errors mode is then set."""

    @kopf_outcomes.hookimpl
    def kopf_outcomes_classify_result(self, run: HandlerRun, result: object) -> None:
        return None


async def test_a_run_reads_every_field_as_a_plain_run_holds_it(logger: logging.Logger) -> None:
    run = build(logger, backoff=7)
    plain = HandlerRun(
        handler_id="h", reason="delete", resource=ResourceRef("kopf.dev", "v1", "kopfexamples"),
        body=run.body, retry=2, runtime=run.runtime, deleting=True, options=HandlerOptions(),
        logger=run.logger, previous=PREVIOUS, errors_mode="TEMPORARY", backoff=7.0,
        finalizer="kopf.zalando.org/KopfFinalizerMarker",
    )
    assert isinstance(run, HandlerRun)
    assert run == plain and plain == run
    assert repr(run) == repr(plain)
    assert run.body is not None and run.body["metadata"]["uid"] == "uid-1"


async def test_the_runtime_is_read_once_when_a_hook_first_asks(logger: logging.Logger) -> None:
    run = build(logger)
    first = run.runtime
    await asyncio.sleep(0.01)
    assert run.runtime == first
    assert 0 <= first < 60


async def test_the_errors_mode_is_the_callers_as_it_was_during_the_run(logger: logging.Logger) -> None:
    deciding = PluginManager()
    deciding.register(Classifier())
    token = runs.default_errors.set(kopf.ErrorsMode.PERMANENT)  # as handler_run sets it where plugins decide
    try:
        run = build(logger, deciding)
    finally:
        runs.default_errors.reset(token)
    assert run.errors_mode == "PERMANENT"
    assert build(logger, deciding, errors="IGNORED").errors_mode == "IGNORED"  # the handler's own wins


async def test_where_only_the_built_ins_decide_the_errors_mode_is_kopfs_default(logger: logging.Logger) -> None:
    """The caller's mode is set only where plugins decide: no other value is read (nor its cost paid)."""
    token = runs.default_errors.set(kopf.ErrorsMode.PERMANENT)  # not set by us here: set only to show it unread
    try:
        run = build(logger)
    finally:
        runs.default_errors.reset(token)
    assert run.errors_mode == "TEMPORARY"
    assert build(logger, errors="IGNORED").errors_mode == "IGNORED"


async def test_a_run_is_read_only(logger: logging.Logger) -> None:
    run = build(logger)
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.retry = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        run._runtime = 7.0  # type: ignore[attr-defined]  # what later hooks would read
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.extra = 1  # type: ignore[attr-defined]  # a plain run refuses it too
    with pytest.raises(dataclasses.FrozenInstanceError):
        del run._sources  # type: ignore[attr-defined]


async def test_replaced_and_copied_runs_are_plain_runs_with_the_same_fields(logger: logging.Logger) -> None:
    run = build(logger)
    for replaced in (dataclasses.replace(run, retry=5), run._replace(retry=5)):
        assert type(replaced) is HandlerRun
        assert replaced._asdict() == {**run._asdict(), "retry": 5}
    copied = copy.copy(run)
    assert type(copied) is HandlerRun and copied == run


def test_a_runtime_read_outside_the_operators_loop_is_by_the_wall_clock() -> None:
    async def progress() -> Any:
        the_handler = handler(lambda **_: None)
        return state_for([the_handler])[the_handler.id]

    state = asyncio.run(progress())  # its loop is gone: a run kept by a hook and read later
    assert 0 <= runtime_of(state) < 60
