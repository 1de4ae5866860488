"""
Attempts to break b5e3717: ``retentions.released_children`` (a middle retained only for released
sub-handlers is released through them; one whose release, or a retained sub-handler's, waits for
its retry is left out), ``retentions.sub_records`` (the resource's own change handlers left out,
by ``operator_resource``) and ``handler_run.unstocked`` (a parent's final failure held by Kopf's
progress of its sub-handlers: ``retentions.kopf_retains_any``), each through Kopf's real
processing of one object (:mod:`.one_object`).
"""
from __future__ import annotations

from typing import Any

import kopf
import pytest

from kopf_outcomes import Fatal
from kopf_outcomes.memory import DEFAULT_KEYS
from tests.unit.kopf_objects import configuration
from tests.unit.observed_process import installed
from tests.unit.one_object import RESOURCE, Operator, Server, server
from tests.unit.releases import stamped
from tests.unit.test_review_child_release import outcomes, retaining
from tests.unit.test_review_own_release import GARBLED, parent_retained_with_a_retained_middle
from tests.unit.test_review_restructure import Observer, Trace, deletion_operator, events, returning, told

__all__ = ["installed", "server"]


def later() -> object:
    return kopf.TemporaryError("later", delay=1)


def states(server: Server) -> dict[str, Any]:
    """What each record says of a retention and its release, and the annotation: for the messages."""
    found: dict[str, Any] = {handler_id: {field: record.get(field) for field in ("outcome", "released_by", "deadline")}
                             for handler_id, record in server.records().items()}
    return found | {"annotation": server.annotations.get(DEFAULT_KEYS.release)}


# --- a middle (or a parent) retained by its own Fatal, its only retained child released ---------------

def retaining_on_its_own(runs: list[str], name: str) -> Any:
    """Runs ``a`` (retains) and ``b`` (retries); at its second run it retains on its own Fatal."""
    async def fn(**_: Any) -> Any:
        runs.append(name)
        if runs.count(name) > 1:
            return Fatal(f"{name}'s own refusal", on_delete="retain")
        await kopf.execute(fns={"a": retaining(runs, f"{name}/a"), "b": returning(runs, f"{name}/b", later)})
        return None
    return fn


def parent_over_a_middle_retaining_on_its_own(runs: list[str]) -> Any:
    async def parent(**_: Any) -> None:
        runs.append("parent")
        kopf.subhandler(id="x")(retaining_on_its_own(runs, "x"))
        kopf.subhandler(id="c", retries=5)(returning(runs, "c", later))
    return parent


@pytest.mark.parametrize("level", ["top-level", "middle"])
async def test_a_handler_retained_by_its_own_fatal_goes_through_its_only_retained_childs_release_at_either_level(
        server: Server, caplog: pytest.LogCaptureFixture, level: str) -> None:
    """A handler retained by its own Fatal (its reason, its stamp) and its ``a`` by its own: the
    person releases ``a`` only. docs/howto/retain-finalizer.md: "the sub-handler's release releases
    the parent once no other sub-handler of it retains" (no exception for a parent's own Fatal);
    the top-level rule (releases.released) and the middle's (b5e3717, released_children) agree: the
    handler goes through ``a``, each told once as released, nothing runs again, the annotation goes."""
    trace = Trace(f"own-fatal-through-child-{level}", caplog)
    runs: list[str] = []
    if level == "top-level":
        op = deletion_operator(server, {"parent": retaining_on_its_own(runs, "parent")})
        held, child = "parent", "parent/a"
    else:
        op = deletion_operator(server, {"parent": parent_over_a_middle_retaining_on_its_own(runs)}, retries=3)
        held, child = "parent/x", "parent/x/a"
    await events(op, server, trace, 10, aged=3600)
    assert outcomes(server).get(held) == "retained" and outcomes(server).get(child) == "retained", trace.steps
    assert "own refusal" in server.records()[held]["reason"]
    assert not server.finalized
    ran = len(runs)
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, child)
    server.age(1)
    await events(op, server, trace, 4, aged=3600)
    trace.dump()
    assert server.finalized and len(runs) == ran, (runs[ran:], states(server), trace.steps[-4:])
    assert DEFAULT_KEYS.release not in server.annotations
    assert told(trace, held) == ["Fatal", "Fatal"] and told(trace, child) == ["Fatal", "Fatal"], trace.steps


# --- a leaf's release through a retained middle under a retained parent, an observer failing ---------

@pytest.mark.parametrize("fails_on", ["parent/x/y", "parent/x", "parent"])
async def test_a_leafs_release_through_a_middle_under_a_retained_parent_with_an_observer_failing_once(
        server: Server, caplog: pytest.LogCaptureFixture, fails_on: str) -> None:
    """``parent`` retained for ``x``, ``x`` for ``y``; the person releases ``y`` by its stamp (``x``
    and ``parent`` go through it, b5e3717) and an observer fails once on one of the three: after
    the retry all go, each told once as released (the failing one twice), nothing runs again, the
    annotation goes with the last."""
    trace = Trace(f"leaf-through-middle-fails-{fails_on.replace('/', '-')}", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"parent": parent_retained_with_a_retained_middle(runs)}, retries=2)
    await events(op, server, trace, 8, aged=3600)
    levels = ("parent", "parent/x", "parent/x/y")
    assert {k: v for k, v in outcomes(server).items() if k in levels} == dict.fromkeys(levels, "retained")
    ran = len(runs)
    release = stamped(server.annotations, "parent/x/y")
    server.annotations[DEFAULT_KEYS.release] = release
    Observer.armed[fails_on] = 1
    server.age(1)
    await events(op, server, trace)
    assert not server.finalized and server.annotations.get(DEFAULT_KEYS.release) == release, trace.steps[-1]
    first = states(server)
    await events(op, server, trace, 2)  # not due
    assert not server.finalized, trace.steps[-2:]
    server.age(3600)
    await events(op, server, trace, 3, aged=3600)
    trace.dump()
    assert server.finalized and len(runs) == ran, (runs[ran:], states(server), first)
    assert DEFAULT_KEYS.release not in server.annotations
    for handler_id in levels:
        expected = ["Fatal"] * (3 if handler_id == fails_on else 2)
        assert told(trace, handler_id) == expected, (handler_id, trace.steps)


# --- two retained siblings under a middle: one released, the other's release retried ----------------

def parent_over_a_middle_with_two_retained_children(runs: list[str]) -> Any:
    """``parent`` (retries=3) runs ``x`` (retries=1), which runs ``y1`` and ``y2`` (both retain) and
    ``z`` (retries): ``x`` is retained for both, ``parent`` for ``x``."""
    async def middle(**_: Any) -> None:
        runs.append("x")
        await kopf.execute(fns={"y1": retaining(runs, "y1"), "y2": retaining(runs, "y2"),
                                "z": returning(runs, "z", later)})

    async def parent(**_: Any) -> None:
        runs.append("parent")
        kopf.subhandler(id="x", retries=1)(middle)
        kopf.subhandler(id="b", retries=5)(returning(runs, "b", later))
    return parent


TWO = ("parent", "parent/x", "parent/x/y1", "parent/x/y2")


async def test_a_middle_waits_while_one_of_two_released_siblings_release_is_retried(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    """The person releases ``y1`` and ``y2`` in one annotation; an observer fails once on ``y2``'s
    release: ``y1`` may go, ``x`` and ``parent`` wait for ``y2``'s retry (not sooner), then all go,
    each told once as released (``y2`` twice), nothing runs again, the annotation goes at the end."""
    trace = Trace("two-siblings-one-retried", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"parent": parent_over_a_middle_with_two_retained_children(runs)}, retries=3)
    await events(op, server, trace, 10, aged=3600)
    assert {k: v for k, v in outcomes(server).items() if k in TWO} == dict.fromkeys(TWO, "retained"), trace.steps
    ran = len(runs)
    release = stamped(server.annotations, "parent/x/y1", "parent/x/y2")
    server.annotations[DEFAULT_KEYS.release] = release
    Observer.armed["parent/x/y2"] = 1
    server.age(1)
    await events(op, server, trace)
    await events(op, server, trace, 2)  # y2's retry not due
    assert not server.finalized and server.annotations.get(DEFAULT_KEYS.release) == release, trace.steps[-3:]
    assert outcomes(server).get("parent/x") == "retained" and outcomes(server).get("parent") == "retained"
    assert told(trace, "parent/x") == ["Fatal"] and told(trace, "parent") == ["Fatal"], trace.steps[-3:]
    server.age(3600)
    await events(op, server, trace, 3, aged=3600)
    trace.dump()
    assert server.finalized and len(runs) == ran, (runs[ran:], outcomes(server), trace.steps[-3:])
    assert DEFAULT_KEYS.release not in server.annotations
    for handler_id in TWO:
        expected = ["Fatal"] * (3 if handler_id == "parent/x/y2" else 2)
        assert told(trace, handler_id) == expected, (handler_id, trace.steps)


async def test_one_of_two_retained_siblings_released_leaves_the_middle_and_parent_retained(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    """Only ``y1`` released: ``x`` still has ``y2`` retained, so neither ``x`` nor ``parent`` goes,
    and neither is told; ``y2``'s release then releases both, each told once."""
    trace = Trace("two-siblings-one-released", caplog)
    runs: list[str] = []
    op = deletion_operator(server, {"parent": parent_over_a_middle_with_two_retained_children(runs)}, retries=3)
    await events(op, server, trace, 10, aged=3600)
    ran = len(runs)
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "parent/x/y1")
    server.age(1)
    await events(op, server, trace, 3, aged=3600)
    assert not server.finalized and outcomes(server).get("parent/x") == "retained", trace.steps[-3:]
    assert "parent/x/y1" not in server.records() or outcomes(server)["parent/x/y1"] != "retained"
    assert told(trace, "parent/x") == ["Fatal"] and told(trace, "parent") == ["Fatal"], trace.steps[-3:]
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "parent/x/y2")
    await events(op, server, trace, 3, aged=3600)
    trace.dump()
    assert server.finalized and len(runs) == ran, (runs[ran:], outcomes(server), trace.steps[-3:])
    for handler_id in TWO:
        assert told(trace, handler_id) == ["Fatal", "Fatal"], (handler_id, trace.steps)


# --- kopf_retains_any under each of Kopf's progress storages ---------------------------------------

STORAGES = {"status": kopf.StatusProgressStorage, "annotations": kopf.AnnotationsProgressStorage,
            "smart": kopf.SmartProgressStorage}


def parent_failing_for_good_at_its_second_run(runs: list[str]) -> Any:
    async def parent(**_: Any) -> Any:
        runs.append("parent")
        if runs.count("parent") > 1:
            raise kopf.PermanentError("the parent's own failure")
        await kopf.execute(fns={"a": retaining(runs, "a"), "b": returning(runs, "b", later)})
        return None
    return parent


@pytest.mark.parametrize("storage", list(STORAGES))
@pytest.mark.parametrize("garbled", [False, True])
async def test_a_parents_final_failure_is_held_by_its_retained_child_under_each_progress_storage(
        server: Server, caplog: pytest.LogCaptureFixture, storage: str, garbled: bool) -> None:
    """``parent`` fails for good at its second run while ``a`` retains; the memory that says so is
    unreadable (or readable, for comparison): under each progress storage the finalizer stays and
    ``a`` does not run again; later events (Kopf's purge of the parent's sub-handler progress, if
    any) strand nothing: ``a``'s release then releases the parent and the finalizer."""
    trace = Trace(f"storage-{storage}-{garbled}", caplog)
    runs: list[str] = []
    settings = configuration.OperatorSettings()
    settings.persistence.progress_storage = STORAGES[storage]()
    registry = kopf.OperatorRegistry()
    kopf.on.delete(*RESOURCE, registry=registry, id="parent", retries=2)(
        parent_failing_for_good_at_its_second_run(runs))
    op = Operator(server, registry, settings)
    await events(op, server, trace)
    assert outcomes(server).get("parent/a") == "retained", trace.steps
    value = stamped(server.annotations, "parent/a")
    if garbled:
        server.annotations[DEFAULT_KEYS.memory] = GARBLED
    server.age(3600)
    await events(op, server, trace, 4, aged=3600)
    assert not server.finalized and runs.count("a") == 1, (runs, trace.steps)
    if garbled:
        return  # the memory that says which stamp was retained is gone: held, as docs/safety.md says
    server.annotations[DEFAULT_KEYS.release] = value
    await events(op, server, trace, 3, aged=3600)
    trace.dump()
    assert server.finalized and runs.count("a") == 1, (runs, trace.steps[-3:])
    assert told(trace, "parent/a") == ["Fatal", "Fatal"], trace.steps


# --- a released sub-handler's progress does not hold its parent's later final failure ---------------

async def test_a_released_childs_progress_holds_nothing_of_its_parents_final_failure(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    """``parent`` (retries=4) waits with ``a`` (retains) and ``b`` (retries for ever); the person
    releases ``a``; then the parent's retries run out: nothing retains any more (``a``'s progress is
    Kopf's failure, not our mark), so Kopf's final failure stands as stock Kopf's (the default
    fatal_on_delete): the finalizer goes, nothing is stranded, ``a`` runs once."""
    trace = Trace("released-child-progress", caplog)
    runs: list[str] = []

    async def parent(**_: Any) -> None:
        runs.append("parent")
        await kopf.execute(fns={"a": retaining(runs, "a"), "b": returning(runs, "b", later)})

    op = deletion_operator(server, {"parent": parent}, retries=4)
    await events(op, server, trace, 2, aged=3600)
    assert outcomes(server).get("parent/a") == "retained" and not server.finalized, trace.steps
    server.annotations[DEFAULT_KEYS.release] = stamped(server.annotations, "parent/a")
    server.age(1)
    await events(op, server, trace, 6, aged=3600)
    trace.dump()
    assert server.finalized and runs.count("a") == 1, (runs, outcomes(server), trace.steps[-6:])
    assert any("Handler 'parent' has exceeded" in message
               for step in trace.steps for _, message in step["logs"]), trace.steps
    assert told(trace, "parent/a") == ["Fatal", "Fatal"], trace.steps
