"""
The violations the generated histories found, each as the minimal history, written out: the
machine's rules called in order, with the oracle strict (nothing of ``KNOWN_OPEN`` waived). A test
of a violation still open on main is expected to fail (``xfail``, strict) while its name is in
``KNOWN_OPEN``; once the fix lands and the name leaves the set, it must pass.
"""
from __future__ import annotations

import pytest

from tests.histories import kopf_access, machine
from tests.histories.known import KNOWN_OPEN
from tests.histories.model import HandlerSpec, PolicySpec


def open_finding(name: str, why: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(name in KNOWN_OPEN, reason=f"{name} is open on main: {why}", strict=True,
                             raises=machine.Violation)


@pytest.fixture(autouse=True)
def strict_oracle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing waived: every check of the oracle applies, every trigger stays as written."""
    monkeypatch.setattr(machine, "KNOWN_OPEN", frozenset())


def succeed_on_a_stale_view_after_a_restart(history: machine.Histories) -> None:
    """The deletion handler parks; another operator writes its bookkeeping; a stale event is
    processed; the handler then succeeds, the operator restarts and is given a stale event again:
    it succeeds on that view, and Kopf's removal of the finalizer is refused."""
    history.delete()
    history.another_operator_writes_its_bookkeeping()
    history.deliver_stale(back=1)
    history.behaviour_changes(behaviour="success", index=0)
    history.restart()
    history.deliver_stale(back=1)


def deliver_all(history: machine.Histories) -> None:
    while history.api.queue:
        history.deliver(count=1, latest=False, crash=None)


@open_finding("new-results-rekey", "a result Kopf stored for another cause's handler re-keys the deletion handler")
def test_another_handlers_stored_result_neither_wakes_nor_rekeys_a_parked_deletion_handler() -> None:
    """A create handler returned a value (Kopf stores it in ``status.<id>``) while another create
    handler was still parked when the object was deleted. In the first deletion cycle Kopf's progress
    still lists the create handlers, so their results are the operator's own writes; the deletion
    handler parks. Kopf then purges that progress, the same result now counts as a change of the
    object: the parked handler is woken, and runs with ``acted_on_this_state == False`` under a new
    idempotency key for a state nobody changed — its side effect starts twice."""
    handlers = (HandlerSpec("hdl0-delete", "delete", {}), HandlerSpec("hdl1-create", "create", {}),
                HandlerSpec("hdl2-create", "create", {}))
    with machine.replayed(handlers, ["pending", "pending", "true"]) as history:
        history.world.behaviours["hdl2-create"] = "true"  # returns True: Kopf stores status.hdl2-create
        deliver_all(history)  # the finalizer; the creation: hdl1 parks, hdl2 succeeds with its result
        history.delete()
        deliver_all(history)  # the deletion handler parks; the event of that write wakes it again


def test_a_release_annotation_from_before_the_deletion_releases_no_later_retention() -> None:
    """A person's release annotation, set before the deletion, released the Fatal that Kopf
    concludes when ``retries=1`` ran out, under ``fatal_on_delete = "retain"``: the object went
    without anyone having released that retention (issue 42, finding 6, by Kopf's own Fatal).
    Found and failing on 61266e7; it passes on the main this branch is rebased on."""
    handlers = (HandlerSpec("hdl0-delete", "delete", {}, retries=1),)
    policy = PolicySpec(defaults={"fatal_on_delete": "retain"}, handlers={})
    with machine.replayed(handlers, ["raise_retry"], policy=policy) as history:
        deliver_all(history)
        history.person_releases(index=0)  # "*", while nothing is retained
        history.delete()
        for _ in range(4):
            deliver_all(history)
            history.time_passes(seconds=61)  # the Retry's delay passes; then retries=1 is used up


@open_finding("release-race", "a release set before a retention answers it where it was retained on an older view")
def test_a_release_set_before_the_retention_is_made_releases_none_of_it() -> None:
    """A person annotates the release while the deletion's event is still queued: the operator
    retains the deletion handler (``Fatal``, ``fatal_on_delete = "retain"``) on that older view,
    which has no annotation, so its PATCH leaves the annotation in place. The next event carries
    both the retention and the release: read as answering it, the finalizer goes, though nobody
    released that retention (it did not exist when the annotation was set). Only a release
    stamped with the retention it answers can tell the two apart (issue 42, memory review #8)."""
    policy = PolicySpec(defaults={"fatal_on_delete": "retain"}, handlers={})
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["fatal"], policy=policy) as history:
        deliver_all(history)
        history.delete()
        history.person_releases(index=1)  # "hdl0-delete", while the deletion's event is still queued
        deliver_all(history)


@open_finding("stale-view", "an event older than one seen runs a parked handler on a memory from before")
def test_an_event_older_than_one_seen_starts_no_side_effect_twice() -> None:
    """The deletion handler parked (``Pending``) and its memory is in the object. After a restart the
    operator is given an older version of the object (a lagging API server, past Kopf's wait for its
    own write): that version has no memory yet, so the handler runs again with
    ``acted_on_this_state == False`` for the very state it acted on, and starts its side effect again
    (under the same idempotency key: only an external system that deduplicates is safe)."""
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["pending"]) as history:
        deliver_all(history)
        history.delete()
        deliver_all(history)  # the deletion handler parks, its memory written
        history.restart()
        deliver_all(history)
        history.deliver_stale(back=1)  # the deleting object as it was before that write


@open_finding("new-results-rekey", "a result Kopf stored for a handler outside a sub-handler's cycle re-keys it")
def test_a_sibling_handlers_stored_result_does_not_rekey_a_sub_handler() -> None:
    """Two deletion handlers: one returns a value (Kopf stores it in ``status.hdl0-delete``), the
    other's sub-handler rechecks (``Pending(recheck=5)``). The sub-handler's state is taken in its
    parent's cycle, where Kopf's progress does not list the sibling: the sibling's result, written
    in the same cycle as the sub-handler's first run, is a change of the object at its next run,
    which gets another idempotency key and ``acted_on_this_state == False``."""
    parent = HandlerSpec("hdl1-delete", "delete", {}, subs=(HandlerSpec("hdl1-delete/s0", "delete", {}),))
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}), parent), ["true", "pending_recheck"]) as history:
        history.world.behaviours["hdl0-delete"] = "true"
        history.delete()
        deliver_all(history)
        history.time_passes(seconds=700)  # the sub-handler's recheck is due
        deliver_all(history)


@open_finding("new-classify-fallthrough", "a raising classify_exception plugin lets the next plugin decide")
def test_a_raising_classify_exception_plugin_holds_even_where_the_policy_says_fatal() -> None:
    """The deletion handler raises ``ValueError``; the policy reads it as ``Fatal`` (released); a
    plugin asked before the policy raises in ``kopf_outcomes_classify_exception``. safety.md: a
    deciding hook's fault makes the run a Retry, the finalizer kept. On main the policy's answer
    decides instead, and the finalizer goes in the same cycle."""
    policy = PolicySpec({}, {}, value_error="fatal")
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["other_error"], policy=policy,
                          plugin=True) as history:
        history.delete()
        history.plugin_fault_changes(fault=("classify_exception", "raise"))
        history.deliver(count=1, latest=False, crash=None)


@open_finding("new-remember-depends-on", "remember with depends_on: a change outside depends_on starts it again")
def test_remember_with_depends_on_starts_nothing_again_for_a_change_outside_it() -> None:
    """``remember = true`` and ``depends_on = ["spec.a"]`` (policy): the deletion handler succeeded
    (its memory kept), then ``spec.b`` changed, which is not part of its state. It is run again, with
    ``acted_on_this_state == False`` for the state it acted on: its side effect starts twice."""
    policy = PolicySpec(defaults={"remember": True, "depends_on": ["spec.a"]}, handlers={})
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["success"], policy=policy) as history:
        history.delete()
        history.user_changes(field="spec.b", value=1)
        history.deliver(count=1, latest=False, crash=None)
        history.time_passes(seconds=6)
        history.deliver(count=1, latest=False, crash=None)


@open_finding("stale-view-stranded", "a run concluded on a stale view is lost: its handler stays parked, stranded")
def test_a_parked_deletion_handler_that_succeeds_after_a_stale_view_is_released(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the quick run's random draw in CI (before it was derandomized). The deletion handler
    parks (``Pending``); another operator writes its bookkeeping (no state: nothing wakes); a stale
    event (older than one seen) is processed, the handler then succeeds, the operator restarts and is
    given a stale event again: the handler succeeds on that view, and Kopf's removal of the finalizer
    (a JSON patch tested against the stale view's resourceVersion) is refused. The object still shows
    the handler parked; Kopf retries the removal each cycle and the memory holds it, and nothing
    wakes a parked handler: every deletion handler concluded, but the finalizer stayed (P2). The
    stale runs' own ``acted_on_this_state`` is the open ``stale-view`` (the test above): waived here."""
    monkeypatch.setattr(machine, "KNOWN_OPEN", frozenset({"stale-view"}))
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["pending"]) as history:
        succeed_on_a_stale_view_after_a_restart(history)


@open_finding("stale-view-retained", "a retained handler concluded for good on a stale view: shown retained")
def test_a_retained_handler_that_succeeds_on_a_stale_view_is_not_stranded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the medium full run (1,500 examples) after stale-view-stranded was fixed: as that
    test, but the stale cycle retains the handler (``Fatal``, retained). After the restart a stale view
    without that retention runs it again; it succeeds, and Kopf's removal of the finalizer is refused.
    The object shows the retention (waiting for a person, its release logged); the run's success is
    lost. Running a retained handler again to land it would release a retention no person released,
    were it another process's: left open (a person's release, as logged, lets it go)."""
    monkeypatch.setattr(machine, "KNOWN_OPEN", frozenset({"stale-view"}))
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["pending"]) as history:
        history.delete()
        history.another_operator_writes_its_bookkeeping()
        history.behaviour_changes(behaviour="fatal_retain", index=0)
        history.deliver_stale(back=1)
        history.behaviour_changes(behaviour="success", index=0)
        history.restart()
        history.deliver_stale(back=1)


@open_finding("new-own-write-kill", "a kill after a Success's own status write re-keys the re-run")
def test_a_kill_after_a_successful_runs_own_write_does_not_rekey_its_rerun() -> None:
    """Found by the medium full run once the handler's own writes were generated again (42-2): the
    deletion handler writes ``status`` through Kopf's patch and succeeds, which ends its record; the
    operator dies after Kopf's status PATCH and before the finalizer's. Kopf runs the handler again
    (its progress was purged): it sees its own write, no record keeps the key it was given, so it
    gets another for the same state."""
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["success"]) as history:
        history.handler_writes_its_own_status(index=0)
        history.delete()
        history.deliver(count=1, latest=False, crash=1)
        deliver_all(history)


@open_finding("new-bookkeeping-wake", "another operator's bookkeeping around a deletion re-runs a parked handler")
def test_another_operators_bookkeeping_around_a_deletion_does_not_start_a_parked_handler_again() -> None:
    """Found by the full run at the end of issue 41's wave (15,004 histories): another operator writes
    its status storage (``status.b-op.progress``) three times, the object is deleted, it writes once
    more; the deletion handler parks (``Pending``). A later event of that bookkeeping runs it again
    with ``acted_on_this_state == False`` for the state it acted on: its side effect starts twice."""
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["pending"]) as history:
        for _ in range(3):
            history.another_operator_writes_its_bookkeeping()
        history.delete()
        history.another_operator_writes_its_bookkeeping()
        history.deliver(count=4, latest=False, crash=None)
        history.time_passes(seconds=6)
        history.deliver(count=1, latest=False, crash=None)


@open_finding("new-own-write-resume", "a resume handler's own write after its Success re-keys its run after a restart")
def test_a_resume_handlers_own_write_does_not_rekey_its_run_after_a_restart() -> None:
    """Found by the medium full run (3,000 examples) on ``ownview`` and on main alike: a resume
    handler writes ``status`` through Kopf's patch and succeeds, which ends its record. After a
    restart Kopf resumes it: no record keeps the key it was given, so the state, its own write in
    it, gets another key (the same cause as new-own-write-kill, reached by a restart instead of a
    kill)."""
    handlers = (HandlerSpec("hdl0-delete", "delete", {}), HandlerSpec("hdl1-create", "create", {}),
                HandlerSpec("hdl2-resume", "resume", {}))
    with machine.replayed(handlers, ["success"] * 3) as history:
        history.handler_writes_its_own_status(index=2)
        history.restart()
        history.deliver(count=1, latest=False, crash=None)
        history.restart()
        history.deliver(count=1, latest=False, crash=None)


@open_finding("new-subhandler-rekey", "another handler's own writes re-key a retried sub-handler whose parent waits")
def test_another_handlers_own_writes_do_not_rekey_a_retried_sub_handler() -> None:
    """Found by the medium full run on ``ownkill`` (2,755 histories), on main alike: a sub-handler is
    given its key and its run is held (``Fatal`` with a bad ``on_delete``: a Retry), so its record keeps
    that key, ``acted: false``. While it waits for its retry, Kopf does not run its parent, and another
    deletion handler retries and writes its own status in each cycle: the sub-handler's record is
    refreshed only in a cycle that runs its parent, so those writes read as a change, and its next run
    gets another key for the state nobody changed. Fixed: a cycle's writes also refresh the records of
    its handlers' sub-handlers that no run of it tracked, in the scope each record stores."""
    sub = HandlerSpec("hdl1-delete/s0", "delete", {})
    handlers = (HandlerSpec("hdl0-delete", "delete", {}), HandlerSpec("hdl1-delete", "delete", {}, None, (sub,)))
    with machine.replayed(handlers, ["retry", "fatal_bad"]) as history:
        history.handler_writes_its_own_status(index=0)


@open_finding("new-own-write-kill-fatal", "a kill after a Fatal's own status write re-keys the re-run")
def test_a_kill_after_a_fatal_runs_own_write_does_not_rekey_its_rerun() -> None:
    """Found by the medium full run on ``ownkill`` once new-own-write-kill was fixed for a Success: the
    deletion handler writes ``status`` through Kopf's patch and fails for good (``Fatal``, released),
    which ends its record as a Success did; the operator dies before the finalizer's removal. Kopf runs
    it again: no record keeps the key it was given, so it gets another for the same state. Fixed as
    for a Success: a released Fatal's record is kept (``fatal``: no retention, holding nothing) where
    its cycle writes into its state, a person's release in such a cycle too."""
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["fatal"]) as history:
        history.handler_writes_its_own_status(index=0)
        history.delete()
        history.deliver(count=1, latest=False, crash=1)
        deliver_all(history)


def test_a_retry_on_a_changed_state_then_a_change_back_is_judged_as_the_docs_say() -> None:
    """Found by the medium full run on ``rekey2`` (2,433 histories), on main alike: the deletion
    handler parks on a state S0, the state changes to S1, where it is retried, then back to S0. The
    Retry about S1 removes the record about S0 (memory-annotation.md: "one about another state removes
    it"; its key kept ``acted: false`` for S1), so the run on S0 again does not know it acted: the
    oracle kept the S0 record through the Retry and called that a side effect started twice. The
    oracle now follows the docs; the key is S0's again either way (one key per state)."""
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["pending"] + ["success"] * 5) as history:
        history.delete()
        history.deliver(count=1, latest=False, crash=None)
        history.behaviour_changes(behaviour="retry", index=0)
        history.user_changes(field="spec.a", value=1)
        history.deliver(count=1, latest=True, crash=None)
        history.user_changes(field="spec.a", value=0)


def test_a_stale_views_memory_write_rekeys_only_as_a_lost_memory_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the medium full run once the key was checked after stale views too (2,170 histories):
    the memory is garbled (a person's typo), the object deleted; one deletion handler writes its own
    status and succeeds, the other parks, and this process sees its write. Then an event older than
    that write (a lagging API server, past the own-write hold, which ends at the first view of the
    write) runs the create handler parked in it (its memory unreadable there: Kopf's parked mark runs
    it once), whose PATCH writes the memory as that view shows it: the parked deletion handler's
    record is gone. Its next run is a lost memory's, keyed from the state as it is now, with the other
    handler's own write in it: a new key for the state it acted on (safety.md, memory.md: the
    documented limit). The oracle re-keys exactly that, and checks the key everywhere else; what the
    stale view does to ``acted_on_this_state`` stays stale-view's (waived here, the key check is not)."""
    monkeypatch.setattr(machine, "KNOWN_OPEN", frozenset({"stale-view"}))
    handlers = (HandlerSpec("hdl0-delete", "delete", {}), HandlerSpec("hdl1-create", "create", {}),
                HandlerSpec("hdl2-create", "create", {}), HandlerSpec("hdl3-delete", "delete", {}))
    with machine.replayed(handlers, ["success", "success", "pending", "pending", "success", "success"]) as history:
        history.memory_garbled()
        history.delete()
        history.handler_writes_its_own_status(index=0)
        history.deliver(count=2, crash=None, latest=True)  # hdl0 writes and succeeds, hdl3 parks; then seen
        assert "hdl3-delete" in history._records_shown()
        history.deliver_stale(back=2)  # the view from before the deletion: hdl2-create runs on it
        assert "hdl3-delete" not in history._records_shown()  # its record lost to that view's write


def test_a_stale_views_older_record_rekeys_as_a_lost_memory_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the generated histories (on 1953472 alike): the deletion handler parks, writing its own
    status at every run (each run's record is about the state that run's patch leaves). Then an event
    older than its last run (a lagging API server) runs another deletion handler; that PATCH writes
    the memory as that view shows it: the parked handler's record is not gone but put back as it was
    before its last own write, about neither the state the object shows nor that state without the
    write (``before_status``). The record written after that view is lost (safety.md): its next run is
    a lost memory's, keyed from the state as it is now, its later own writes in it, so a new key
    (memory.md: "that older view's cycle writes the memory as the view shows it"). The oracle took
    only a record gone as lost, not one put back older; what the stale view does to
    ``acted_on_this_state`` stays stale-view's (waived here, the key check is not)."""
    monkeypatch.setattr(machine, "KNOWN_OPEN", frozenset({"stale-view"}))
    handlers = (HandlerSpec("hdl0-delete", "delete", {}), HandlerSpec("hdl1-delete", "delete", {}),
                HandlerSpec("hdl2-create", "create", {}), HandlerSpec("hdl3-delete", "delete", {}))
    behaviours = ["success", "success", "success", "pending_recheck", "success", "success"]
    with machine.replayed(handlers, behaviours, policy=PolicySpec({}, {}), plugin=True) as history:
        history.delete()
        history.handler_writes_its_own_status(index=3)
        history.behaviour_changes(behaviour="raise_retry", index=5)
        history.deliver(count=4, crash=None, latest=False)  # hdl3 parks, and runs again on its own write
        history.behaviour_changes(behaviour="success", index=1)
        history.deliver(count=3, crash=None, latest=False)  # hdl1 succeeds, hdl3 parks again on its own write
        before = history._records_shown()["hdl3-delete"]
        history.deliver_stale(back=1)  # the view before hdl3's last own write: hdl1 runs on it
        assert history._records_shown()["hdl3-delete"] != before  # its record put back as that view shows it


def test_a_conclusion_whose_write_is_refused_is_not_taken_as_persisted() -> None:
    """Found by the full run of this branch (611 histories, on main's oracle alike): the deletion
    handler parks, a label changes and it parks again about that state. An event from before both
    (no memory, no progress in it) runs it on that view, where it succeeds; its write is refused (Kopf
    tests its JSON patch against that view), so the object still shows it waiting on the labelled
    state, which the refused Success is not about: nothing but a change wakes it (safety.md). The
    finalizer is rightly held; the oracle took the refused Success as persisted, and required the
    release (P2). (One about the state the object shows stays the oracle's conclusion: safety.md says
    it runs again to land, test_review_wave5.)"""
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["pending"]) as history:
        history.delete()
        deliver_all(history)  # it parks
        history.user_changes(field="labels", value=0)
        deliver_all(history)  # it parks again, about the labelled state
        history.behaviour_changes(behaviour="success", index=0)
        history.deliver_stale(back=3)  # the deleting object before its first memory: it succeeds there
        assert history.api.refused


def test_a_lost_memory_keys_the_state_as_it_is_at_the_handlers_next_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the full run at the end of the session (12,000 examples; a P3 of the oracle's own): a
    deletion handler with two sub-handlers, the first parks with a recheck, the second fails (retried,
    its record ``acted: false`` with its key); a person garbles the memory; the first sub-handler
    writes its own status at its next run (in the drain), and only then does the second run, with its
    memory lost: memory.md keys a lost memory by the state as it is then, the operator's own writes
    since it was keyed in it. The oracle re-keyed only for own writes there when the memory was lost;
    it now judges the handler's first run after the loss (``unrecorded``)."""
    monkeypatch.setattr(machine, "KNOWN_OPEN", frozenset({"stale-view"}))
    parent = HandlerSpec("hdl0-delete", "delete", {}, subs=(HandlerSpec("hdl0-delete/s0", "delete", {}),
                                                           HandlerSpec("hdl0-delete/s1", "delete", {})))
    with machine.replayed((parent,), ["pending_recheck", "other_error", "success", "success", "success",
                                      "success"]) as history:
        history.delete()
        history.deliver(count=1, latest=False, crash=None)
        history.memory_garbled()
        history.handler_writes_its_own_status(index=0)
        history.deliver_stale(back=1)


def test_a_deletion_held_for_its_unread_options_is_remembered_as_a_retry() -> None:
    """Found by the full run at the end of the session (a P3 of the oracle's own): one plugin whose
    ``handler_options`` raises; the deletion handler writes its own status and succeeds; the deletion
    is held (its options unknown: fail closed, safety.md), which the record keeps as a Retry
    (``acted: false``, the same key); the model took the run for a Success whose own write keeps its
    record (acted), and so expected ``acted_on_this_state`` True at the run after the plugin healed."""
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["success"], plugin=True) as history:
        history.plugin_fault_changes(fault=("handler_options", "raise"))
        history.delete()
        history.handler_writes_its_own_status(index=0)
        history.deliver(count=1, latest=False, crash=None)


def test_a_kill_in_a_persons_release_of_a_handler_with_its_own_write() -> None:
    """Found by the full run at the end of the session (P3), a fault of the model: the deletion handler
    writes its own status and is retained (``Fatal``, ``on_delete="retain"``); a person releases it; the
    operator dies after the release's memory PATCH, before the finalizer's removal, and Kopf runs the
    handler again on the state it acted on. Its record is kept (``fatal``, the same key): the release
    cycle writes nothing, but the key was made before the handler's own write, so the state as it is
    would give another (memory.md: a lost memory's key is made from the state as it is now, the
    operator's own writes in it; the code's ``cycle.unwritten_end``), and the re-run sees
    ``acted_on_this_state == True``, rightly. The model had missed three rules: a retention is a
    record about the state it acted on (memory-annotation.md: "a record exists for a handler that is
    Pending or retained"; it kept the record before it), a person's release of a retention ends it as
    a released Fatal does (memory.md's table: "a Fatal that lets the finalizer go (the rules', or a
    person's release of a retention)"), and such an end keeps the record where its key was made before
    the operator's own writes in its state, not only where its own cycle writes into it."""
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["success"]) as history:
        history.handler_writes_its_own_status(index=0)
        history.behaviour_changes(behaviour="fatal_retain", index=0)
        history.delete()
        history.deliver(count=2, latest=False, crash=None)
        history.person_releases(index=0)
        history.deliver(count=2, latest=False, crash=1)
        assert [run.acted for run in history.world.runs] == [False, True]


def test_a_kill_in_a_persons_release_of_a_handler_without_writes_runs_it_as_a_new_state() -> None:
    """The model's counterpart of the one above: the deletion handler parks (``Pending`` with a
    recheck), is retained at its recheck on the same state, and a person releases it; the operator
    dies before the finalizer's removal. Nothing of the operator's is in its state, so the release
    ends the record (memory.md: "a person's release of a retention: the record goes"), and the re-run
    sees ``acted_on_this_state == False`` under the same key. The model kept the Pending's record
    through the retention and its release, and called the re-run a side effect started twice."""
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["pending_recheck"]) as history:
        history.delete()
        deliver_all(history)
        history.behaviour_changes(behaviour="fatal_retain", index=0)
        history.time_passes(seconds=700)
        deliver_all(history)
        history.person_releases(index=0)
        history.deliver(count=1, latest=False, crash=1)
        deliver_all(history)
        runs = history.world.runs
        assert [run.acted for run in runs] == [False, True, False] and len({run.key for run in runs}) == 1


def test_a_kill_after_a_released_fatal_that_wrote_nothing_runs_it_as_a_new_state() -> None:
    """The deletion handler parks (``Pending`` with a recheck) and fails for good at its recheck
    (``Fatal``, released), writing nothing; the operator dies before the finalizer's removal. memory.md:
    a Fatal that lets the finalizer go ends the record as a Success does; the re-run sees
    ``acted_on_this_state == False``, under the same key. The model kept the Pending's record."""
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["pending_recheck"]) as history:
        history.delete()
        deliver_all(history)
        history.behaviour_changes(behaviour="fatal_release", index=0)
        history.time_passes(seconds=700)
        history.deliver(count=1, latest=False, crash=1)
        deliver_all(history)
        runs = history.world.runs
        assert [run.acted for run in runs] == [False, True, False] and len({run.key for run in runs}) == 1


def test_a_kill_after_a_success_that_wrote_nothing_after_its_own_write_keeps_its_record() -> None:
    """The deletion handler writes its own status and parks (``Pending`` with a recheck), then stops
    writing and succeeds at its recheck; the operator dies before the finalizer's removal. Its key was
    made before its own write, so the record stays (the unit test
    ``test_review_kept_success.py::test_a_kill_after_a_success_that_wrote_nothing_keeps_the_key_its_pending_wrote_under``)
    and the re-run sees ``acted_on_this_state == True`` under that key. The model kept a Success's record
    only where its own cycle wrote into its state."""
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["pending_recheck"]) as history:
        history.handler_writes_its_own_status(index=0)
        history.delete()
        deliver_all(history)
        history.handler_writes_its_own_status(index=0)  # it writes no more
        history.behaviour_changes(behaviour="success", index=0)
        history.time_passes(seconds=700)
        history.deliver(count=1, latest=True, crash=1)
        deliver_all(history)
        runs = history.world.runs
        assert [run.acted for run in runs] == [False, True, True] and len({run.key for run in runs}) == 1


def test_a_kill_in_a_persons_release_of_a_retention_by_used_up_retries_keeps_its_record() -> None:
    """As the first of these, the retention made by Kopf's ``retries=1`` used up (a ``Retry`` under
    ``fatal_on_delete = "retain"``): that Retry is the run's final failure, retained, a record about the
    state it acted on, kept through the release (its key made before the handler's own write). The
    model took the run for a Retry that left no record, and the re-run's ``acted_on_this_state == True``
    for a side effect that never starts."""
    policy = PolicySpec(defaults={"fatal_on_delete": "retain"}, handlers={})
    handlers = (HandlerSpec("hdl0-delete", "delete", {}, retries=1),)
    with machine.replayed(handlers, ["raise_retry"], policy=policy) as history:
        history.handler_writes_its_own_status(index=0)
        history.delete()
        history.deliver(count=2, latest=False, crash=None)
        history.person_releases(index=0)
        history.deliver(count=2, latest=False, crash=1)
        assert [run.acted for run in history.world.runs] == [False, True]


def test_an_options_hook_that_fails_after_its_answer_was_cached_does_not_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the full run of 2026-12-06 (read as P1): the options plugin answered well, then began
    to raise, while a deletion handler waited; a stale view's cycle then ran it, a plugin adjusted it
    to Success, and the finalizer went. The code is right: the options hook is asked once per handler
    and cached for the process (plugins.md, hookspecs.py), so its later failure reaches no run and
    holds nothing. The model had read every run under a failing options hook as held."""
    monkeypatch.setattr(machine, "KNOWN_OPEN", frozenset({"stale-view"}))  # the stale run's own acted (P3)
    handlers = (HandlerSpec("hdl0-delete", "delete", {}), HandlerSpec("hdl1-create", "create", {}))
    with machine.replayed(handlers, ["pending", "success", "success", "success", "success", "success"],
                          plugin=True) as history:
        history.handler_writes_its_own_status(index=0)
        history.delete()
        history.another_operator_writes_its_bookkeeping()
        for _ in range(3):
            history.deliver(count=1, crash=None, latest=False)
        history.another_operator_writes_its_bookkeeping()
        history.deliver_stale(back=1)
        history.plugin_fault_changes(fault=("adjust_outcome", "success"))
        history.plugin_fault_changes(fault=("handler_options", "raise"))
        history.deliver_stale(back=2)
        assert history.world.runs[-1].faults == {"adjust_outcome": "success"}  # the options were cached
        assert not history.api.finalized


def test_an_options_hook_failing_after_a_restart_holds_the_deletion() -> None:
    """Guard of the model's cache: a new process asks the plugin again, so the same failure holds."""
    handlers = (HandlerSpec("hdl0-delete", "delete", {}),)
    with machine.replayed(handlers, ["pending"], plugin=True) as history:
        history.delete()
        deliver_all(history)  # parked; the options answered and cached
        history.plugin_fault_changes(fault=("adjust_outcome", "success"))
        history.plugin_fault_changes(fault=("handler_options", "raise"))
        history.restart()
        history.user_changes(field="spec.a", value=1)  # wakes it
        for _ in range(3):  # held, it is retried without end: a few cycles
            history.deliver(count=1, latest=False, crash=None)
        assert history.world.runs[-1].faults == {"adjust_outcome": "success", "handler_options": "raise"}
        assert history.api.finalized  # held: its options could not be read


def test_an_older_view_without_the_own_write_its_key_was_made_with_keys_the_state_it_shows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by a medium run of 2026-12-06 (P3, the oracle's): the parked deletion handler writes its
    own status; a user's change wakes it, and it is keyed on a view with its own write in it; after a
    restart a view older than that write (no memory, no own write) keys the state as that view shows
    it: another key (safety.md: an older view without the own writes a key was made with). The
    oracle had held such a view to the key of the newer one."""
    monkeypatch.setattr(machine, "KNOWN_OPEN", frozenset({"stale-view"}))  # the stale run's own acted (P3)
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["pending"] + ["success"] * 5) as history:
        history.handler_writes_its_own_status(index=0)
        history.delete()
        history.user_changes(field="spec.a", value=1)
        history.deliver(count=1, crash=None, latest=False)
        history.another_operator_writes_its_bookkeeping()
        history.deliver_stale(back=1)
        history.another_operator_writes_its_bookkeeping()
        history.restart()
        history.deliver_stale(back=4)
        keyed, stale = history.world.runs[-2:]
        assert keyed.state == stale.state and keyed.own != stale.own and keyed.key != stale.key


def test_a_refused_release_lands_at_the_next_cycle_where_no_wait_is_shown() -> None:
    """Found by the medium full run (1,500 examples; a P1 of the oracle's own): the deletion handler
    succeeds on a stale view of the deleting object (``spec.a`` 0) after a person changed ``spec.a``
    to 1; Kopf's removal of the finalizer, tested against that view's resourceVersion, is refused.
    The object shows no wait of the handler (it never parked), so the refused conclusion is Kopf's:
    Kopf keeps its removal in the process and applies it at the next cycle, before any handler runs,
    whatever the object shows then; a change during a deletion runs no concluded deletion handler
    again (safety.md, "Where the object shows no wait of the handler"). Stock Kopf does the same."""
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["success"] * 6) as history:
        history.delete()
        history.user_changes(field="spec.a", value=1)
        history.deliver_stale(back=1)  # the deleting object with spec.a 0: it succeeds, its release refused
        assert history.api.finalized or not kopf_access.JSON_PATCHED_RELEASE  # Kopf 1.37: it lands at once
        deliver_all(history)  # the event with spec.a 0 (refused again), then spec.a 1: the removal lands
        assert history.api.body is None
        assert [run.handler for run in history.world.runs] == ["hdl0-delete"]  # run once, on the stale view


def test_a_refused_release_is_forgotten_by_a_restart_and_the_handler_runs_again() -> None:
    """As above, with a restart after the refused release: Kopf's removal was in the old process only,
    so the handler runs on the object as it is (``spec.a`` 1) before the finalizer goes."""
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["success"] * 6) as history:
        history.delete()
        history.user_changes(field="spec.a", value=1)
        history.deliver_stale(back=1)
        history.restart()
        deliver_all(history)
        assert history.api.body is None
        assert [run.state for run in history.world.runs][-1] != history.world.runs[0].state


def test_a_state_keyed_again_after_an_older_views_record_with_the_operators_own_write_gets_its_key() -> None:
    """Found by a review's replay of 2026-12-06 (P3, the oracle's): a sub-handler parks on ``a=1``
    (keyed without any own write); an older view (``a=0``) runs it and its record, about ``a=0``, lands
    with the handler's own write; the next view shows ``a=1`` again, with that own write in it and a
    record about another state: the key is made from the state as it is now, a new one (safety.md:
    unless the operator's own writes changed its state since it was given its key)."""
    parent = HandlerSpec("hdl0-delete", "delete", {}, subs=(HandlerSpec("hdl0-delete/s0", "delete", {}),))
    with machine.replayed((parent,), ["pending"] + ["success"] * 5) as history:
        history.delete()
        history.handler_writes_its_own_status(index=0)
        history.user_changes(field="spec.a", value=1)
        history.restart()
        history.deliver(count=2, crash=None, latest=False)
        history.deliver_stale(back=2)
        history.deliver(count=1, crash=None, latest=False)
        first, _, again = history.world.runs
        assert first.state == again.state and first.own != again.own and first.key != again.key


def test_an_older_view_with_the_record_from_before_a_garbled_memory_gives_its_first_key() -> None:
    """Found by the full run of 2026-12-06 (P3, the oracle's): the deletion handler writes its own
    status and parks under its first key; garbage in the memory makes the next run key the state
    afresh (with the own write in it: another key, memory.md); the operator dies before that run's
    write, and a view older than the garbage shows the first record again: the run on it gets the
    first key, one this state was given before (safety.md: an older view shows a memory from before)."""
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["success"] * 6) as history:
        history.handler_writes_its_own_status(index=0)
        history.delete()
        history.behaviour_changes(behaviour="pending", index=0)
        history.deliver(count=1, crash=None, latest=False)
        history.memory_garbled()
        history.behaviour_changes(behaviour="success", index=0)
        history.deliver(count=2, crash=0, latest=False)
        history.deliver_stale(back=1)
        first, afresh, older = history.world.runs
        assert first.key == older.key != afresh.key and older.acted


def test_a_pending_under_an_unreadable_options_hook_stands() -> None:
    """Found by the full run of 2026-12-06 (P3, the model's): a deletion handler's options cannot be
    read (the plugin raises); its Success is held (safety.md), but its Pending stands, a record about
    its state, since a Pending keeps the finalizer anyway: its recheck runs with
    ``acted_on_this_state == True``. The model read every conclusion under the fault as held."""
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["success"] * 6, plugin=True) as history:
        history.delete()
        history.plugin_fault_changes(fault=("handler_options", "raise"))
        history.deliver(count=2, crash=None, latest=False)  # its Success held
        history.behaviour_changes(behaviour="pending_recheck", index=0)
        history.deliver(count=1, crash=None, latest=False)  # its Pending stands
        history.time_passes(seconds=30)
        history.deliver(count=1, crash=None, latest=False)  # the recheck
        assert [run.acted for run in history.world.runs] == [False, False, True]
        assert history.api.finalized


def test_a_run_on_an_event_queued_before_a_garbled_memory_is_not_the_first_after_the_loss() -> None:
    """Found by the full run of 2026-12-06 (P3, the oracle"s): garbage is written into the memory while
    events from before it are queued; the runs on those older views read the record from before (its
    key), and only the first run on a view with the garbage keys the state afresh, the operator"s own
    write in it (memory.md). The oracle had spent "the first run after the loss" on the older view."""
    behaviours = ["pending_recheck", "temporary", "success", "raise_retry", "true", "fatal_release"]
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), behaviours, plugin=True) as history:
        history.delete()
        history.plugin_fault_changes(fault=("handler_options", "raise"))
        history.deliver(count=1, crash=None, latest=False)
        history.deliver(count=1, crash=None, latest=False)
        history.behaviour_changes(behaviour="pending_recheck", index=0)
        history.another_operator_writes_its_bookkeeping()
        history.another_operator_writes_its_bookkeeping()
        history.deliver(count=3, crash=None, latest=True)
        history.behaviour_changes(behaviour="fatal_bad", index=0)
        history.handler_writes_its_own_status(index=5)
        history.person_releases(index=0)
        history.deliver(count=2, crash=None, latest=True)
        history.delete()
        history.user_changes(field="status", value=1)
        history.deliver(count=4, crash=0, latest=False)
        history.delete()
        history.time_passes(seconds=700)
        history.restart()
        history.another_operator_writes_its_bookkeeping()
        history.deliver(count=4, crash=None, latest=True)
        history.memory_garbled()
        history.handler_writes_its_own_status(index=1)
        history.deliver(count=4, crash=None, latest=False)
        assert len({run.key for run in history.world.runs[-3:]}) == 2  # the record's, then the state's afresh


def test_a_record_an_older_view_wrote_without_the_own_write_rekeys_the_state_that_shows_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the full run of 2026-12-06 (P3, the oracle's): after a restart, a view older than the
    handler's own write (no memory, no own write) runs the parked deletion handler, and that cycle's
    record, about the state as the older view shows it, lands beside the own write the object keeps;
    the next view shows the state with that write, about which no record is: the key is made from it,
    a new one (safety.md: the older view's write carries the memory as that view shows it)."""
    monkeypatch.setattr(machine, "KNOWN_OPEN", frozenset({"stale-view"}))  # the stale runs' own acted (P3)
    with machine.replayed((HandlerSpec("hdl0-delete", "delete", {}),), ["pending"] + ["success"] * 5) as history:
        history.delete()
        history.another_operator_writes_its_bookkeeping()
        history.handler_writes_its_own_status(index=0)
        history.deliver_stale(back=1)
        history.handler_writes_its_own_status(index=0)  # it writes no more
        history.restart()
        history.deliver_stale(back=1)
        history.deliver(count=5, crash=None, latest=False)
        keys = [run.key for run in history.world.runs]
        assert keys[0] == keys[1] != keys[-1]


def test_a_persons_star_release_frees_an_unreadable_memorys_hold_as_documented() -> None:
    """Found by the full run of 2026-12-06, 15:33 (P1, the oracle's): garbage in the memory, then a
    person's release ``*``, then a change, then an older view on which the deletion handler succeeds
    (its write refused): Kopf's refused removal of the finalizer lands at the next cycle. That is the
    documented way out (held.py: an unreadable memory holds until it is fixed, removed, or released
    with ``*``); the oracle had no rule for it. Without the ``*`` the same history holds (below)."""
    handlers = (HandlerSpec("hdl0-delete", "delete", {}),)
    with machine.replayed(handlers, ["success"] * 6) as history:
        history.delete()
        history.memory_garbled()
        history.person_releases(index=0)  # "*"
        history.user_changes(field="spec.a", value=1)
        history.deliver_stale(back=3)
    assert history.api.body is None  # released, as the person asked


def test_an_unreadable_memory_without_a_release_holds_kopfs_refused_removal() -> None:
    """The guard of the history above, without the person's ``*``: the unreadable memory holds Kopf's
    refused removal of the finalizer (safety.md), until the handler concludes on the object as it is."""
    handlers = (HandlerSpec("hdl0-delete", "delete", {}),)
    with machine.replayed(handlers, ["success"] * 6) as history:
        history.delete()
        history.memory_garbled()
        history.user_changes(field="spec.a", value=1)
        history.deliver_stale(back=2)
        assert history.api.finalized  # held: the memory cannot be read
