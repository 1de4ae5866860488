"""depends_on_objects at its edges: each test reproduced a defect an adversarial review found (issue 24)."""
from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Iterator
from typing import Any

import kopf
import pytest
from kopf._cogs.clients import patching
from kopf._cogs.structs import bodies, patches

import kopf_outcomes
from kopf_outcomes import objects
from kopf_outcomes._kopf import delays, dependents, requeue
from tests.unit.kopf_objects import (
    RESOURCE,
    application,
    body_after,
    changing_cause,
    configuration,
    execution,
    handler,
    lifecycles,
    parked_state,
)
from tests.unit.test_patched_execution import BODY

UID = BODY["metadata"]["uid"]
NS = BODY["metadata"]["namespace"]


@pytest.fixture
def installed(unpatched: None) -> Iterator[Any]:
    declared = set(objects.declared)
    seen = copy.copy(dependents._seen)
    yield kopf_outcomes.install(entry_points=False)
    objects.declared.clear()
    objects.declared.update(declared)
    dependents._seen.clear()
    dependents._seen.update(seen)


def a_child(name: str, *owners: str, labels: dict[str, str] | None = None, **more: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": NS, "name": name, "uid": f"u-{name}", "resourceVersion": "1",
                         "ownerReferences": [{"uid": owner} for owner in owners], "labels": labels or {}}, **more}


def index_of(source: objects.Source, *children: dict[str, Any]) -> dict[str, Any]:
    """Kopf's index of the source as it holds these children (a plain mapping of stores)."""
    index: dict[str, list[objects.ObjectRef]] = {}
    for body in children:
        for key, ref in source.entries(body).items():
            index.setdefault(key, []).append(ref)
    return {source.index: index}


async def a_cycle(handlers: list[Any], body: dict[str, Any], state: Any, indices: dict[str, Any],
                  logger: logging.Logger, lifecycle: Any = lifecycles.all_at_once) -> tuple[dict[str, Any], Any]:
    cause = changing_cause(body, logger)
    cause.indices = indices
    outcomes = await execution.execute_handlers_once(
        lifecycle=lifecycle, settings=configuration.OperatorSettings(), handlers=handlers, cause=cause,
        state=state if state is not None else parked_state(handlers, {}))
    return {str(k): v for k, v in outcomes.items()}, cause


# --- 1. A field whose value is a list or a mapping breaks every cycle of the parent ---------------

async def test_a_field_whose_value_is_a_list_does_not_break_the_parents_cycle(installed: Any, logger: logging.Logger):
    source = kopf_outcomes.owned("v1", "pods", fields=["status.conditions"])

    @kopf_outcomes.depends_on_objects(source, registry=kopf.OperatorRegistry())
    async def fn(**_: Any) -> Any:
        return kopf_outcomes.Pending("waiting for the pods") if kopf_outcomes.recall().objects else None

    pod = a_child("pod", UID, status={"conditions": [{"type": "Ready", "status": "False"}]})
    # Was: TypeError: unhashable type: 'list' in objects.lookup (a set of ObjectRef-s), out of Kopf's
    # processing: the throttler logs it and the object is never processed again until a new event.
    outcomes, _ = await a_cycle([handler(fn)], BODY, None, index_of(source, pod), logger)
    assert "h" in outcomes


# --- 2. A rechecking handler is not woken by its objects (docs: "a parked or rechecking change ---
# --- handler wakes when one of them changes")                                                   ---

async def test_a_rechecking_handler_wakes_when_its_objects_change(installed: Any, logger: logging.Logger):
    source = kopf_outcomes.owned("v1", "configmaps")
    runs: list[tuple[str, ...]] = []

    @kopf_outcomes.depends_on_objects(source, registry=kopf.OperatorRegistry())
    async def fn(**_: Any) -> Any:
        names = tuple(ref.name for ref in kopf_outcomes.recall().objects)
        runs.append(names)
        return kopf_outcomes.Pending(f"{len(names)} remain", recheck=600) if names else None

    h = handler(fn)
    outcomes, first = await a_cycle([h], BODY, None, index_of(source, a_child("a", UID), a_child("b", UID)), logger)
    assert runs == [("a", "b")]
    # "a" is gone: Kopf's index no longer has it; the wake-up requeues the object's last event.
    outcomes, _ = await a_cycle([h], body_after(first), parked_state([h], outcomes),
                                index_of(source, a_child("b", UID)), logger)
    assert runs == [("a", "b"), ("b",)]  # was: not run until the recheck is due (600 s), the wake-up lost


# --- 3. Two handlers woken by the same objects, under Kopf's default lifecycle (asap) ------------

async def test_two_handlers_woken_by_their_objects_both_run_under_kopfs_default_lifecycle(
        installed: Any, logger: logging.Logger):
    source = kopf_outcomes.owned("v1", "configmaps")
    runs: list[str] = []

    # h1 waits for something else too (its conclusion does not change); h2 waits only for child "a".
    @kopf_outcomes.depends_on_objects(source, registry=kopf.OperatorRegistry())
    async def h1_fn(**_: Any) -> Any:
        runs.append("h1")
        return kopf_outcomes.Pending("waiting for the external system")

    @kopf_outcomes.depends_on_objects(source, registry=kopf.OperatorRegistry())
    async def h2_fn(**_: Any) -> Any:
        runs.append("h2")
        return kopf_outcomes.Pending("a remains") if any(
            ref.name == "a" for ref in kopf_outcomes.recall().objects) else None

    h1, h2 = handler(h1_fn, id="h1"), handler(h2_fn, id="h2")
    outcomes, first = await a_cycle([h1, h2], BODY, None,
                                    index_of(source, a_child("a", UID), a_child("b", UID)), logger)
    assert sorted(runs) == ["h1", "h2"]
    runs.clear()
    # Child "a" goes: both are woken. Kopf's default lifecycle (asap) runs one handler per cycle;
    # h1 concludes as before (quiet: removed from the outcomes, nothing written).
    state = parked_state([h1, h2], outcomes)
    outcomes, second = await a_cycle([h1, h2], body_after(first), state, index_of(source, a_child("b", UID)),
                                     logger, lifecycle=lifecycles.asap)
    told = delays.take(second.patch)
    nothing_will_run_it = (not second.patch and told is not None and told.moved is not None and not told.moved()
                           and not told.rechecks)
    # Was: h2 (which would succeed) did not run, nothing is written (no event of the object comes),
    # and apply() sees no move since the cycle began: h2 stays parked until some other change.
    assert runs == ["h1"]
    assert not nothing_will_run_it


# --- 4. An object that leaves a source wakes nobody ----------------------------------------------

async def test_a_child_that_is_orphaned_wakes_its_former_owner():
    owned = kopf_outcomes.owned("v1", "configmaps")
    objects._sources[owned.index] = owned
    woken = asyncio.Event()
    objects.changed(a_child("c", UID))  # Kopf's listing: owned by the parent
    forget = objects.wait(owned.wake_keys(BODY), woken)
    try:
        # Its ownerReference to the parent was removed (an orphaning cascade, a person's edit):
        # Kopf's index drops it from the parent's children, the parent's objects changed.
        assert owned.entries(a_child("c")) == {}
        objects.changed(a_child("c"))
        assert woken.is_set()  # was: not woken (only the owners the new body names are)
    finally:
        forget()
        del objects._sources[owned.index]


async def test_a_child_whose_labels_no_longer_match_wakes_the_selecting_parents():
    selected = kopf_outcomes.selected("v1", "pods", labels={"app": "db"})
    objects._sources[selected.index] = selected
    woken = asyncio.Event()
    objects.changed(a_child("pod", labels={"app": "db"}))  # Kopf's listing: selected
    forget = objects.wait(selected.wake_keys(BODY), woken)
    try:
        objects.changed(a_child("pod", labels={"app": "web"}))  # was app=db: it left the selection
        assert woken.is_set()  # was: not woken
    finally:
        forget()
        del objects._sources[selected.index]


# --- 5. A missing index (registry= forgotten) reads as "no objects": a finalizer released --------

async def test_an_index_that_kopf_does_not_have_is_not_read_as_no_objects(installed: Any, logger: logging.Logger,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          caplog: pytest.LogCaptureFixture):
    default_registry = kopf.OperatorRegistry()  # not to touch the real default one
    monkeypatch.setattr(kopf, "get_default_registry", lambda: default_registry)
    operator_registry = kopf.OperatorRegistry()  # what kopf.run(registry=...) runs
    source = kopf_outcomes.owned("v1", "configmaps")

    # Wrong use: registry= forgotten; the index goes to Kopf's default registry, not the operator's.
    @kopf_outcomes.depends_on_objects(source)
    @kopf.on.delete(*RESOURCE.group.split("/"), RESOURCE.version, RESOURCE.plural, registry=operator_registry)
    async def delete_fn(**_: Any) -> Any:
        return kopf_outcomes.Pending("children remain") if kopf_outcomes.recall().objects else None

    [h] = [x for x in operator_registry._changing.get_all_handlers()]
    # The children exist, but Kopf's indices of this operator have no such index.
    outcomes, _ = await a_cycle([h], BODY, None, {}, logger)
    # Was: the handler was told it had no objects, succeeded, and Kopf released the finalizer.
    assert str(h.id) not in outcomes  # not run: its objects are unknown, not "none"
    assert "whose Kopf index the operator does not have" in caplog.text


# --- 6. A wake-up during Kopf's own sleep (a stock handler's delay) waits for that delay ---------

async def test_a_wake_up_is_not_held_back_by_kopfs_own_sleep(installed: Any, logger: logging.Logger,
                                                             monkeypatch: pytest.MonkeyPatch):
    async def patch_obj(**_: Any) -> tuple[dict[str, Any], None]:
        return {}, None  # the touch-dummy after Kopf's sleep: no API here

    monkeypatch.setattr(patching, "patch_obj", patch_obj)
    source = kopf_outcomes.owned("v1", "configmaps")
    backlog: asyncio.Queue[Any] = asyncio.Queue()
    requeue._stream.set(requeue.Stream(backlog, {"type": "MODIFIED", "object": BODY}))
    patch = patches.Patch()
    # A parked handler waits on its children; a stock handler of the object retries in 3 s.
    delays.tell(patch, parked_state([], {}), {"parked"}, [], tuple(source.wake_keys(BODY)), lambda: False)
    apply: Any = application.apply
    task = asyncio.create_task(apply(settings=configuration.OperatorSettings(), resource=RESOURCE,
                                     body=bodies.Body(copy.deepcopy(BODY)), patch=patch, delays=[3.0],
                                     logger=logger, stream_pressure=asyncio.Event()))
    try:
        await asyncio.sleep(0.05)
        objects.changed(a_child("c", UID))  # a child changed: the parked handler must run at once
        requeued = await asyncio.wait_for(backlog.get(), timeout=1.0)  # was: only after Kopf's 3 s
        assert isinstance(requeued, requeue.Requeued)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# --- 7. A cluster-scoped referenced object is never found ---------------------------------------

def test_a_referenced_cluster_scoped_object_is_found():
    source = kopf_outcomes.referenced("storage.k8s.io/v1", "storageclasses", field="spec.storageClassName")
    parent = {**BODY, "spec": {"storageClassName": "fast"}}
    storage_class = {"metadata": {"name": "fast", "uid": "u-fast", "resourceVersion": "1"}}  # no namespace
    refs = objects.lookup([source], parent, index_of(source, storage_class))
    # Was: indexed under "/fast", looked up as "default/fast": a create handler waiting for it parks
    # forever; a delete handler waiting for it to go proceeds at once.
    assert [ref.name for ref in refs] == ["fast"]


# --- 8. dependents.saw was remembered before the write lands ------------------------------------------

async def test_a_conclusion_whose_patch_failed_does_not_count_as_seen(installed: Any, logger: logging.Logger):
    source = kopf_outcomes.owned("v1", "configmaps")
    runs: list[int] = []

    @kopf_outcomes.depends_on_objects(source, registry=kopf.OperatorRegistry())
    async def fn(**_: Any) -> Any:
        count = len(kopf_outcomes.recall().objects)
        runs.append(count)
        return kopf_outcomes.Pending(f"{count} remain") if count else None

    h = handler(fn)
    outcomes, first = await a_cycle([h], BODY, None, index_of(source, a_child("a", UID), a_child("b", UID)), logger)
    stored = body_after(first)
    state = parked_state([h], outcomes)
    # "a" goes: a new conclusion ("1 remain") is put in the patch, but the PATCH fails (an API error,
    # the object's worker throttled): the object stays as it was stored after the first cycle.
    await a_cycle([h], stored, state, index_of(source, a_child("b", UID)), logger)
    assert runs == [2, 1]
    # The next cycle (any event of the object) sees the stored memory: 2 children; there is 1.
    await a_cycle([h], stored, state, index_of(source, a_child("b", UID)), logger)
    assert runs == [2, 1, 1]  # was: not run: _seen says it concluded about 1 child already
