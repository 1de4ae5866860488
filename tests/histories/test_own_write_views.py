"""
A view older than the operator's own memory write runs none of the object's handlers
(``_kopf/own_writes.py``); what is newer than that write runs as before: a person's removal of the
memory re-keys (memory.md), and a relisting that skips the write's own event strands nothing.
Written as histories, with the oracle strict (nothing of ``KNOWN_OPEN`` waived).
"""
from __future__ import annotations

import pytest

from tests.histories import fake_api, machine
from tests.histories.model import HandlerSpec, PolicySpec


@pytest.fixture(autouse=True)
def strict_oracle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "KNOWN_OPEN", frozenset())


def parked_deletion() -> machine.Histories:
    """The deletion handler parked (``Pending``): its memory written, the event of that write queued."""
    history = machine.Histories()
    history.start(spec=((HandlerSpec("hdl0-delete", "delete", {}),), PolicySpec({}, {}), False),
                  behaviours=["pending"])
    history.delete()
    history.deliver(count=1, latest=False, crash=None)
    return history


def test_a_view_older_than_the_own_write_runs_nothing_and_the_write_s_own_view_runs_as_before() -> None:
    history = parked_deletion()
    try:
        history.another_operator_writes_its_bookkeeping()  # queued after our write's event
        older = fake_api.Event("MODIFIED", history.api.versions[-3])  # the deletion, before our write
        runs, writes, stored = len(history.world.runs), history.api.kopf_writes, history.api.body
        history.clock.advance(6)  # past Kopf's wait for its own write
        history._cycle(older, None)
        assert len(history.world.runs) == runs  # held: nothing ran on the view without its record
        assert (history.api.kopf_writes, history.api.body) == (writes, stored)  # nor wrote Kopf's progress from it
        assert history.api.finalized
        while history.api.queue:  # our write's view, then the bookkeeping's: the oracle judges each run
            history.deliver(count=1, latest=False, crash=None)
        assert all(run.acted for run in history.world.runs[runs:])  # what runs there knows it acted
    finally:
        history.teardown()


@pytest.mark.parametrize("latest", [False, True], ids=["in-order", "relisted"])
def test_a_person_removing_the_memory_after_the_write_re_keys_even_where_the_write_s_event_is_skipped(
        latest: bool) -> None:
    """memory.md: a person who removes the memory re-keys the handler. The view of that removal is
    newer than our write: it runs the handler afresh, also where a relisting skips our write's own
    event (``latest``: only the newest of the queued events is delivered)."""
    history = parked_deletion()
    try:
        history.world.behaviours["hdl0-delete"] = "success"
        history.memory_garbled()
        runs = len(history.world.runs)
        history.deliver(count=1 if latest else 2, latest=latest, crash=None)
        assert [run.acted for run in history.world.runs[runs:]] == [False]
        while history.api.queue:
            history.deliver(count=1, latest=False, crash=None)
        assert history.api.body is None  # released: nothing stranded
    finally:
        history.teardown()
