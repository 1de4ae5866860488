"""
Rechecks without writes, in the patched ``apply()`` and ``invoke_handler()``: the object's event is
queued again after any write (one that changes nothing brings no event), but not when a new event
came; Kopf's own earlier delay is left to Kopf; quiet rechecks count as attempts.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
from typing import Any

import pytest

import kopf_outcomes
from kopf_outcomes import HandlerRun, Outcome, Pending, hookimpl
from kopf_outcomes._kopf import delays, requeue
from kopf_outcomes.memory import MEMORY_ANNOTATION, MemoryRecord
from tests.unit.kopf_objects import application, changing_cause, handler, parked_state, run_handlers
from tests.unit.test_patched_execution import BODY


@pytest.fixture
def installed(unpatched: None) -> Any:
    return kopf_outcomes.install(entry_points=False)


def a_stream() -> asyncio.Queue[Any]:
    backlog: asyncio.Queue[Any] = asyncio.Queue()
    requeue._stream.set(requeue.Stream(backlog, {"type": "MODIFIED", "object": {"x": 1}}))
    return backlog


async def apply_with_recheck(patch: dict[str, Any], stock: list[float], pressure: asyncio.Event) -> None:
    final = parked_state([], {})
    delays.tell(patch, final, {"h"}, [0.05])
    apply: Any = application.apply
    await apply(delays=stock, patch=patch, stream_pressure=pressure)


async def test_a_recheck_requeues_after_a_write_that_brings_no_event(fake_apply: list[dict[str, Any]]) -> None:
    backlog = a_stream()
    await apply_with_recheck({"status": {"phase": "Waiting"}}, [], asyncio.Event())
    assert fake_apply[0]["delays"] == []
    assert isinstance(backlog.get_nowait(), requeue.Requeued)


async def test_a_recheck_leaves_the_next_cycle_to_a_new_event(fake_apply: list[dict[str, Any]]) -> None:
    backlog = a_stream()
    pressure = asyncio.Event()
    pressure.set()  # the write's own event (or any other) came
    await apply_with_recheck({"status": {"phase": "Waiting"}}, [], pressure)
    assert backlog.empty()


async def test_kopfs_own_earlier_delay_is_left_to_kopf(fake_apply: list[dict[str, Any]]) -> None:
    backlog = a_stream()
    await apply_with_recheck({}, [0.01], asyncio.Event())
    assert fake_apply[0]["delays"] == [0.01]  # Kopf sleeps and wakes itself, as without us
    assert backlog.empty()  # and the cycle after its wake-up schedules ours


async def test_quiet_rechecks_count_as_attempts(installed: Any, logger: logging.Logger,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(requeue, "SPREAD", 0.0)  # the grid as stored, without its phase (test_requeue.py)
    retries: list[int] = []

    class Seen:
        @hookimpl
        def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome, patch: Any) -> None:
            retries.append(run.retry)

    installed.register(Seen(), name="seen")

    async def fn(retry: int, **_: Any) -> Outcome:
        retries.append(retry)
        return Pending("waiting", recheck=60)

    h = handler(fn)
    since = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=180.2)
    record = MemoryRecord(digest="d", outcome="pending", reason="waiting", since=since.isoformat(), recheck=60.0)
    body = {**BODY, "metadata": {**BODY["metadata"], "annotations": {MEMORY_ANNOTATION: json.dumps({"h": record})}}}
    await run_handlers([h], changing_cause(body, logger), parked_state([h], {}))
    assert retries == [2, 2]  # Kopf stored 0 retries here; the grid says 2 quiet rechecks ran before
