"""depends_on_objects: the sources' keys and entries, the lookup in Kopf's indices, the wake-ups,
the memory's answer, and clear errors for wrong use (the real wake-ups: tests/e2e/test_objects.py)."""
from __future__ import annotations

import asyncio

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import objects
from kopf_outcomes.memory import Memory, MemoryRecord

PARENT = {"metadata": {"namespace": "ns", "name": "p", "uid": "u-p"}, "spec": {"secretName": "creds",
                                                                                "names": ["a", "b"]}}


def child(name: str, *owners: str, labels: dict[str, str] | None = None, deleting: bool = False) -> dict:
    metadata = {"namespace": "ns", "name": name, "uid": f"u-{name}", "resourceVersion": "7",
                "ownerReferences": [{"uid": owner} for owner in owners], "labels": labels or {}}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata}


def test_owned_children_are_indexed_under_each_owner_and_found_by_the_parents_uid():
    source = kopf_outcomes.owned("batch/v1", "jobs")
    entries = source.entries(child("j", "u-p", "u-q", deleting=True))
    assert set(entries) == {"u-p", "u-q"}
    assert entries["u-p"] == objects.ObjectRef("ns", "j", "u-j", "7", True)
    assert source.keys(PARENT) == ["u-p"]
    assert source.entries(child("orphan")) == {}  # no owner: no entry (Kopf drops an old one)


def test_referenced_objects_are_found_by_the_names_in_the_field():
    one = kopf_outcomes.referenced("v1", "secrets", field="spec.secretName")
    many = kopf_outcomes.referenced("v1", "secrets", field="spec.names")
    assert one.keys(PARENT) == ["ns/creds", "/creds"]  # a namespaced or a cluster-scoped resource
    assert many.keys(PARENT) == ["ns/a", "/a", "ns/b", "/b"]
    assert one.keys({"metadata": {"namespace": "ns"}}) == []  # no field: nothing referenced
    assert one.entries(child("creds")) == {"ns/creds": objects.ObjectRef("ns", "creds", "u-creds", "7", False)}


def test_the_state_of_an_object_is_its_existence_deletion_and_chosen_fields_not_its_version():
    plain, watched = kopf_outcomes.owned("batch/v1", "jobs"), kopf_outcomes.owned("batch/v1", "jobs",
                                                                                 fields=["status.succeeded"])
    before = {**child("j", "u-p"), "status": {"succeeded": 0}}
    after = {"metadata": {**before["metadata"], "resourceVersion": "8"}, "status": {"succeeded": 1}}
    state = [objects.fingerprint((source.entries(body)["u-p"],)) for source in (plain, watched)
             for body in (before, after)]
    assert state[0] == state[1]  # a new resourceVersion alone is no new state
    assert state[2] != state[3]  # the chosen field changed
    assert plain.index != watched.index  # another source: another index


def test_lookup_reads_kopfs_indices_in_a_stable_order_and_the_fingerprint_follows_the_objects():
    source = kopf_outcomes.owned("v1", "configmaps")
    index = {"u-p": [source.entries(child(name, "u-p"))["u-p"] for name in ("b", "a")]}
    refs = objects.lookup([source], PARENT, {source.index: index})
    assert [ref.name for ref in refs] == ["a", "b"]
    assert objects.unindexed([source], {}) == [source]  # not the operator's index: unknown, not "none"
    fewer = objects.lookup([source], PARENT, {source.index: {"u-p": index["u-p"][:1]}})
    assert objects.fingerprint(refs) != objects.fingerprint(fewer)
    assert objects.fingerprint(refs) == objects.fingerprint(tuple(refs))


async def test_a_change_wakes_exactly_the_waiters_whose_keys_it_has():
    owned, selected = kopf_outcomes.owned("v1", "configmaps"), kopf_outcomes.selected("v1", "pods", labels={"a": "1"})
    objects._sources.update({owned.index: owned, selected.index: selected})
    by_owner, by_label, other = asyncio.Event(), asyncio.Event(), asyncio.Event()
    forgets = [objects.wait(owned.wake_keys(PARENT), by_owner), objects.wait(selected.wake_keys(PARENT), by_label),
               objects.wait(["uid:someone-else"], other)]
    try:
        objects.changed(child("c", "u-p"))
        assert by_owner.is_set() and not by_label.is_set() and not other.is_set()
        objects.changed(child("pod", labels={"a": "1"}))
        assert by_label.is_set() and not other.is_set()
    finally:
        for forget in forgets:
            forget()
        del objects._sources[owned.index], objects._sources[selected.index]
    assert objects._waiters == {}  # forgotten: nothing kept per object


def test_the_memory_has_acted_only_on_the_same_state_and_the_same_objects():
    record = MemoryRecord(digest="d", outcome="pending", reason="r")
    assert Memory(record, "d", "k").acted_on_this_state  # no other objects: as before
    assert Memory(record, "d", "k", objects=(), objects_digest="f1", previous_objects_digest="f1").acted_on_this_state
    assert not Memory(record, "d", "k", objects=(), objects_digest="f2",
                      previous_objects_digest="f1").acted_on_this_state


@pytest.fixture()
def undeclared():
    declared = set(objects.declared)
    yield
    objects.declared.clear()
    objects.declared.update(declared)


def test_the_decorator_registers_one_kopf_index_per_source_and_marks_the_function(undeclared):
    registry = kopf.OperatorRegistry()
    source = kopf_outcomes.owned("v1", "configmaps")

    @kopf_outcomes.depends_on_objects(source, registry=registry)
    @kopf_outcomes.depends_on_objects(source, registry=registry)  # twice: still one index
    def fn(**_: object) -> None: ...

    ids = [handler.id for handler in registry._indexing.get_all_handlers()]
    assert ids == [source.index]
    assert objects.sources_of(fn) == (source, source)


@pytest.mark.parametrize("make, message", [
    (lambda: kopf_outcomes.depends_on_objects("v1/configmaps"), "argument 1 is 'v1/configmaps', not a source"),
    (lambda: kopf_outcomes.depends_on_objects(), "at least one source"),
    (lambda: kopf_outcomes.owned(), "give the resource as Kopf's decorators take it"),
    (lambda: kopf_outcomes.referenced("v1", "secrets", field="spec..name"), "field: .spec..name. is not a field path"),
    (lambda: kopf_outcomes.owned("v1", "pods", fields="status.phase"), "a list of field paths, not a single"),
    (lambda: kopf_outcomes.selected("v1", "pods", labels={}), "non-empty mapping"),
])
def test_wrong_use_is_a_clear_error(make, message):
    with pytest.raises((TypeError, ValueError), match=message):
        make()


async def test_other_objects_on_another_kind_are_an_error_named_once(undeclared, unpatched, logger, collector):
    from tests.unit.kopf_objects import cause_of, handler_of, run_handlers
    from tests.unit.test_patched_execution import BODY

    kopf_outcomes.install(entry_points=False)

    @kopf_outcomes.depends_on_objects(kopf_outcomes.owned("v1", "configmaps"), registry=kopf.OperatorRegistry())
    async def tick(**_: object) -> None:
        return None

    for _ in range(2):
        await run_handlers([handler_of("timer", tick)], cause_of("timer", BODY, logger))
    errors = [message for level, message in collector.pairs() if level >= 40]
    assert len(errors) == 1 and "only a change handler can (this one is a timer handler)" in errors[0]


async def test_a_change_handler_sees_its_objects_from_kopfs_indices(undeclared, unpatched, logger):
    from tests.unit.kopf_objects import cause_of, handler_of, run_handlers
    from tests.unit.test_patched_execution import BODY

    kopf_outcomes.install(entry_points=False)
    source = kopf_outcomes.owned("v1", "configmaps")
    seen = []

    @kopf_outcomes.depends_on_objects(source, registry=kopf.OperatorRegistry())
    async def create_fn(**_: object) -> None:
        memory = kopf_outcomes.recall()
        seen.append((memory.objects, memory.acted_on_this_state))

    cause = cause_of("change", BODY, logger)
    uid = BODY["metadata"]["uid"]
    ref = objects.ObjectRef("ns", "c", "u-c", "1", False)
    cause.indices = {source.index: {uid: [ref]}}
    await run_handlers([handler_of("change", create_fn)], cause)
    assert seen == [((ref,), False)]


async def test_the_memory_names_the_objects_it_saw_for_why(undeclared, unpatched, logger):
    """Issue 44, finding 2: the stored conclusion names its other objects (source, fields, each
    object with a digest of its fields), not only their fingerprint."""
    import json

    from kopf_outcomes.memory import MEMORY_ANNOTATION
    from tests.unit.kopf_objects import cause_of, handler_of, run_handlers
    from tests.unit.test_patched_execution import BODY

    kopf_outcomes.install(entry_points=False)
    source = kopf_outcomes.owned("batch/v1", "jobs", fields=["status.succeeded"])

    @kopf_outcomes.depends_on_objects(source, registry=kopf.OperatorRegistry())
    async def create_fn(**_: object) -> kopf_outcomes.Outcome:
        return kopf_outcomes.Pending("waiting for the jobs")

    cause = cause_of("change", BODY, logger)
    ref = objects.ObjectRef("ns", "j", "u-j", "1", False, (None,))
    cause.indices = {source.index: {BODY["metadata"]["uid"]: [ref]}}
    await run_handlers([handler_of("change", create_fn)], cause)
    [record] = json.loads(cause.patch["metadata"]["annotations"][MEMORY_ANNOTATION]).values()
    assert record["objects"] == objects.fingerprint((ref,))
    assert record["seen"] == [{"how": "owned", "resource": ["batch/v1", "jobs"], "fields": ["status.succeeded"],
                               "objects": [{"namespace": "ns", "name": "j", "uid": "u-j",
                                            "fields": objects.fields_digest([None])}]}]
