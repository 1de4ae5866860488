"""A handler that writes its status through its own API client wakes itself (issue 29, item 5):
what woke each run is kept in its memory (``why`` shows it), the pattern is told once with the
paths and the option that leaves them out, and ``ignore`` does."""
from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

import kopf_outcomes
from kopf_outcomes import Pending, memory, wakeups
from kopf_outcomes.diagnosis import render
from kopf_outcomes.diagnosis.kube import Kind
from kopf_outcomes.diagnosis.report import report
from tests.unit.kopf_objects import body_after, changing_cause, handler, parked_state, run_handlers
from tests.unit.test_patched_execution import BODY


@pytest.fixture
def installed(unpatched: None) -> Iterator[Any]:
    yield kopf_outcomes.install(entry_points=False)
    wakeups._told.clear()
    wakeups._fruitless.clear()


def own_client_writer(runs: list[int]) -> Any:
    """Like the ported operator: a deletion handler that writes status.phase and a timestamp
    with its own client (outside Kopf's patch) on every run, and waits."""
    async def delete_fn(**_: Any) -> Any:
        runs.append(1)
        return Pending("waiting for the job")
    return delete_fn


async def cycles(fn: Any, count: int, logger: logging.Logger) -> dict[str, Any]:
    """Run the handler, then replay ``count`` events each carrying its own client's write."""
    h = handler(fn, id="delete_fn")
    cause = changing_cause(BODY, logger)
    outcomes = await run_handlers([h], cause)
    state, body = parked_state([h], outcomes), body_after(cause)
    for n in range(count):
        body["status"] = {**body.get("status", {}), "phase": "Deleting", "updated": f"12:00:0{n}"}
        cause = changing_cause(body, logger)
        outcomes = await run_handlers([h], cause, state)
        state = parked_state([h], outcomes) if outcomes else state  # not run: Kopf's state stays
        body = body_after(cause)
    return body


async def test_own_writes_wake_it_and_the_memory_says_which_paths_did(installed: Any, logger: logging.Logger,
                                                                     caplog: pytest.LogCaptureFixture):
    runs: list[int] = []
    last = await cycles(own_client_writer(runs), 4, logger)
    assert len(runs) == 5  # the shape of the finding: each own write wakes the handler again
    record = memory.read(last, logger)["delete_fn"]
    assert record["woken_by"] == [["status.updated"], ["status.updated"], ["status.updated"]]  # the last 3 runs
    hints = [r for r in caplog.records if "woken 3 times by a change of status.updated" in r.getMessage()]
    assert len(hints) == 1  # told once per handler in a process, after the third fruitless wake-up
    assert 'handler_options(ignore=["status.updated"])' in hints[0].getMessage()
    assert hints[0].levelno == logging.WARNING
    shown = render.why(report(Kind("kopf.dev", "v1", "kopfexamples", "KopfExample", namespaced=True), last))
    assert "delete_fn was woken by a change of (its latest runs, the last first):\n  status.updated" in shown


async def test_the_first_wake_up_names_every_path_that_changed(installed: Any, logger: logging.Logger):
    runs: list[int] = []
    last = await cycles(own_client_writer(runs), 1, logger)
    assert memory.read(last, logger)["delete_fn"]["woken_by"] == [["status.phase", "status.updated"]]


async def test_ignore_leaves_the_handlers_own_writes_out_of_its_state(installed: Any, logger: logging.Logger,
                                                                     caplog: pytest.LogCaptureFixture):
    runs: list[int] = []
    fn = kopf_outcomes.handler_options(ignore=["status.phase", "status.updated"])(own_client_writer(runs))
    last = await cycles(fn, 4, logger)
    assert len(runs) == 1  # parked: its own writes are not its state
    assert "woken_by" not in memory.read(last, logger)["delete_fn"]
    assert not [r for r in caplog.records if "concluded as before" in r.getMessage()]


def test_a_record_with_a_malformed_woken_by_is_no_memory():
    record = {"digest": "d", "outcome": "pending", "reason": "r", "woken_by": ["status.phase"]}
    with pytest.raises(ValueError, match="malformed"):
        memory.parse(json.dumps({"h": record}))
