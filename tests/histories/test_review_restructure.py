"""
Found by the review of the restructured hot path (issue 45) in the generated histories
(KOPF_OUTCOMES_HISTORIES=full, 6,000 examples), not a regression: the same on 71b4678. Here, with
the other histories, because the harness needs Kopf >= 1.38 (tests/unit runs on Kopf 1.37 too).
"""
from __future__ import annotations

import pytest

from tests.histories import machine as histories
from tests.histories.model import HandlerSpec, PolicySpec

# --- found by the generated histories (KOPF_OUTCOMES_HISTORIES=full, 6,000 examples) ---------------------

@pytest.mark.xfail(strict=True, raises=histories.Violation, reason=(
    "P2, an object stranded: a rechecking deletion handler (Pending(recheck=5)) that succeeds on a stale event "
    "(its write refused) is not run again within the drain's 40 cycles. Traced (lead, 2026-12-06): the stale "
    "view shows no memory, so its cycle schedules no recheck (reaction.ours); a rechecking handler then runs "
    "only at a point of its grid (waiting.recheck_wait, requeue.next_due), which requeue.sleep_and_requeue "
    "reaches by sleeping until it; the histories call Kopf's processing without the worker (no _stream), and "
    "their drain requeues every 700 s, always the same phase of a 5 s grid, so no cycle is ever due. In an "
    "operator, the stale event's arrival ends the sleep that would have requeued the recheck ('a new event "
    "came') and its cycle schedules none: the recheck waits for the object's next event. Fix direction: a "
    "refused write of a conclusion for good (unrecorded.concluded) requeues the object's event after Kopf's "
    "consistency wait. Not the restructuring's: the same on 71b4678."))
def test_a_rechecking_deletion_handler_that_succeeds_on_a_stale_view_is_not_stranded() -> None:
    handlers = (HandlerSpec(id="hdl0-delete", cause="delete", options={}, retries=None, subs=()),)
    with histories.replayed(handlers, ["success"] * 6, policy=PolicySpec({}, {})) as history:
        history.behaviour_changes(behaviour="pending_recheck", index=0)
        history.delete()
        history.deliver(count=2, crash=None, latest=False)
        history.time_passes(seconds=1)
        history.behaviour_changes(behaviour="success", index=0)
        history.deliver_stale(back=1)
