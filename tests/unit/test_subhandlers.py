"""
Sub-handlers (``kopf.execute``) that wait for us park their parent: it wakes on a change of its
state, and a retained sub-handler is released by the annotation that names it.
"""

from __future__ import annotations

import datetime
import json
import logging
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import Fatal, Outcome, Pending
from kopf_outcomes._kopf.marks import PARKED_DELAY, PARKED_MARK
from kopf_outcomes.memory import MEMORY_ANNOTATION, RELEASE_ANNOTATION
from kopf_outcomes.outcomes import with_deadline
from tests.unit.kopf_objects import Reason, body_after, changing_cause, handler, parked_state, run_handlers
from tests.unit.releases import stamped
from tests.unit.test_patched_execution import BODY, records_in


@pytest.fixture
def installed(unpatched: None) -> Any:
    return kopf_outcomes.install(entry_points=False)


class Family:
    """A parent handler that runs one sub-handler, ``child``, answering what it is told."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.parent_calls = self.child_calls = 0

        async def child(**_: Any) -> object:
            self.child_calls += 1
            return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

        async def parent(**_: Any) -> None:
            self.parent_calls += 1
            await kopf.execute(fns={"child": child})

        self.handler = handler(parent, id="parent")


async def test_a_pending_sub_handler_parks_its_parent_with_its_own_memory(
        installed: Any, logger: logging.Logger) -> None:
    family = Family(Pending("waiting for the callback"))
    cause = changing_cause(BODY, logger, reason=Reason.DELETE)

    outcomes = await run_handlers([family.handler], cause)

    assert (outcomes["parent"].final, outcomes["parent"].delay) == (False, PARKED_DELAY)
    assert str(outcomes["parent"].exception).endswith(PARKED_MARK)  # ours, not Kopf's children retry
    assert "waiting for the callback" in str(outcomes["parent"].exception)
    records = records_in(cause.patch)
    assert {records["parent"]["outcome"], records["parent/child"]["outcome"]} == {"pending"}

    # The same state again: neither runs (no ten-year sleep without a wake-up, no touching).
    state = parked_state([family.handler], outcomes)
    assert await run_handlers([family.handler], changing_cause(body_after(cause), logger), state) == {}
    assert (family.parent_calls, family.child_calls) == (1, 1)


async def test_a_change_wakes_the_parent_and_the_sub_handler_then_succeeds(
        installed: Any, logger: logging.Logger) -> None:
    family = Family(Pending("waiting"), None)
    cause = changing_cause(BODY, logger, reason=Reason.DELETE)
    outcomes = await run_handlers([family.handler], cause)
    state = parked_state([family.handler], outcomes)

    changed = changing_cause(body_after(cause, status={"deletion": "done"}), logger, reason=Reason.DELETE)
    outcomes = await run_handlers([family.handler], changed, state)

    assert (family.parent_calls, family.child_calls) == (2, 2)
    assert outcomes["parent"].final is True and outcomes["parent"].exception is None


async def test_a_retained_sub_handler_is_released_by_the_annotation(installed: Any, logger: logging.Logger) -> None:
    family = Family(Fatal("broken", on_delete="retain"))
    cause = changing_cause(BODY, logger, reason=Reason.DELETE)
    outcomes = await run_handlers([family.handler], cause)
    assert (outcomes["parent"].final, outcomes["parent"].delay) == (False, PARKED_DELAY)
    assert "parent/child retains the finalizer: broken" in str(outcomes["parent"].exception)
    state = parked_state([family.handler], outcomes)

    released = body_after(cause)
    released["metadata"]["annotations"][RELEASE_ANNOTATION] = stamped(released["metadata"]["annotations"],
                                                                 "parent/child")
    released_cause = changing_cause(released, logger, reason=Reason.DELETE)
    outcomes = await run_handlers([family.handler], released_cause, state)

    assert family.child_calls == 1  # released without running the sub-handler again
    assert outcomes["parent"].final is True  # the parent ends; Kopf removes the finalizer


async def test_a_stock_retry_of_one_sub_handler_leaves_kopfs_children_retry(
        installed: Any, logger: logging.Logger) -> None:
    async def flaky(**_: Any) -> Outcome:
        raise kopf.TemporaryError("flaky", delay=5)

    async def waiting(**_: Any) -> Outcome:
        return Pending("waiting")

    async def parent(**_: Any) -> None:
        await kopf.execute(fns={"flaky": flaky, "waiting": waiting})

    outcomes = await run_handlers([handler(parent, id="parent")], changing_cause(BODY, logger, reason=Reason.DELETE))
    assert outcomes["parent"].final is False
    assert 4 < outcomes["parent"].delay <= 5  # Kopf's own retry of the children stands
    assert not str(outcomes["parent"].exception).endswith(PARKED_MARK)


async def test_a_rechecking_sub_handler_makes_its_parent_recheck(installed: Any, logger: logging.Logger) -> None:
    family = Family(Pending("polling the external system", recheck=5))
    cause = changing_cause(BODY, logger, reason=Reason.DELETE)
    outcomes = await run_handlers([family.handler], cause)
    assert (outcomes["parent"].final, outcomes["parent"].delay) == (False, 5)
    assert type(outcomes["parent"].exception).__name__ == "Rechecking"  # ours: no Kopf retry, no touch
    records = records_in(cause.patch)
    assert records["parent"]["recheck"] == 5 and records["parent/child"]["recheck"] == 5


async def test_a_sub_handlers_escalation_deadline_is_its_parents_and_runs_both(
        installed: Any, logger: logging.Logger) -> None:
    """Issue 34, finding 1, for sub-handlers: they run only in their parent's run, so a parked
    parent takes the first of its children's deadlines, and runs them then."""
    family = Family(with_deadline(Pending("waiting for the callback"), 600))
    cause = changing_cause(BODY, logger, reason=Reason.DELETE)
    outcomes = await run_handlers([family.handler], cause)
    records = records_in(cause.patch)
    child_deadline = datetime.datetime.fromisoformat(records["parent/child"]["deadline"])
    assert 599 < (child_deadline - datetime.datetime.now(datetime.timezone.utc)).total_seconds() <= 600
    assert records["parent"]["deadline"] == records["parent/child"]["deadline"]
    state = parked_state([family.handler], outcomes)

    # Unchanged, before the deadline: neither runs. At the deadline (here: moved into the past), both run.
    assert await run_handlers([family.handler], changing_cause(body_after(cause), logger), state) == {}
    passed = body_after(cause)
    annotation = passed["metadata"]["annotations"]
    memory = json.loads(annotation[MEMORY_ANNOTATION])
    for record in memory.values():
        record["deadline"] = "2020-01-01T00:00:00+00:00"
    annotation[MEMORY_ANNOTATION] = json.dumps(memory)
    await run_handlers([family.handler], changing_cause(passed, logger, reason=Reason.DELETE), state)
    assert (family.parent_calls, family.child_calls) == (2, 2)
