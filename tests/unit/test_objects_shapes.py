"""depends_on_objects in real operators' shapes (issue 29, items 4 and 6): children selected by a
label or a field computed from their parent, found in Kopf's own index in one look-up and woken
one parent at a time; references to other namespaces."""
from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from types import SimpleNamespace
from typing import Any

import kopf
import pytest
from kopf._core.actions import execution
from kopf._core.engines.indexing import OperatorIndexers

import kopf_outcomes
from kopf_outcomes import objects

CLUSTER = "example.com/cluster"


def parent(name: str, namespace: str = "ns", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "uid": f"u-{name}"}, "spec": spec}


def child(name: str, namespace: str = "ns", labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "uid": f"u-{name}", "resourceVersion": "1",
                         "labels": labels or {}}, "spec": spec}


class Reads(Mapping[str, Any]):
    """Kopf's index, counting the keys read: a look-up must read only the parent's own."""

    def __init__(self, index: Mapping[str, Any]) -> None:
        self.index, self.read = index, []

    def __getitem__(self, key: str) -> Any:
        self.read.append(key)
        return self.index[key]

    def __contains__(self, key: object) -> bool:
        return key in self.index

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("a look-up scanned the whole index")

    def __len__(self) -> int:
        return len(self.index)


def kopf_index(source: objects.Source, *bodies: dict[str, Any]) -> dict[str, Any]:
    """Kopf's own indexers fed with the source's index function's results, as Kopf does."""
    indexers = OperatorIndexers()
    handler_id = kopf.HandlerId(source.index)
    indexers.ensure([SimpleNamespace(id=handler_id)])  # type: ignore[list-item]
    for body in bodies:
        indexers.replace(body, {handler_id: execution.Outcome(final=True, result=source.entries(body))})
    return {source.index: indexers[handler_id].index}


@pytest.fixture()
def selector() -> Iterator[objects.Source]:
    source = kopf_outcomes.selected("batch/v1", "jobs", labels={CLUSTER: "{metadata.name}"})
    objects._sources[source.index] = source
    yield source
    del objects._sources[source.index]


def test_children_selected_by_a_label_computed_from_the_parent_are_each_parents_own(selector):
    jobs = [child("a-1", labels={CLUSTER: "a"}), child("a-2", labels={CLUSTER: "a"}),
            child("b-1", labels={CLUSTER: "b"}), child("other", labels={"app": "x"}),
            child("a-elsewhere", namespace="other", labels={CLUSTER: "a"})]
    indices = kopf_index(selector, *jobs)
    counted = Reads(indices[selector.index])
    found = objects.lookup([selector], parent("a"), {selector.index: counted})
    assert [ref.name for ref in found] == ["a-1", "a-2"]  # not b's, not another namespace's
    assert len(counted.read) == 1  # one key read: O(this parent's children), not a scan
    assert [ref.name for ref in objects.lookup([selector], parent("b"), indices)] == ["b-1"]
    assert objects.lookup([selector], parent("c"), indices) == ()


def test_children_selected_by_a_field_equal_to_a_field_of_the_parent():
    source = kopf_outcomes.selected("v1", "configmaps", where={"spec.clusterName": "{metadata.name}"})
    indices = kopf_index(source, child("x", clusterName="a"), child("y", clusterName="b"), child("z"))
    assert [ref.name for ref in objects.lookup([source], parent("a"), indices)] == ["x"]
    both = kopf_outcomes.selected("v1", "configmaps", labels={"tier": "db"},
                                  where={"spec.clusterName": "{metadata.namespace}-{metadata.name}"})
    indices = kopf_index(both, child("x", labels={"tier": "db"}, clusterName="ns-a"),
                         child("y", labels={"tier": "web"}, clusterName="ns-a"))
    assert [ref.name for ref in objects.lookup([both], parent("a"), indices)] == ["x"]  # the fixed label holds


def test_a_label_computed_from_a_number_is_its_text():
    source = kopf_outcomes.selected("v1", "pods", labels={"generation": "{spec.generation}"},
                                    where={"spec.generation": "{spec.generation}"})
    indices = kopf_index(source, child("x", labels={"generation": "3"}, generation=3),
                         child("y", labels={"generation": "3"}, generation="3"))
    assert [ref.name for ref in objects.lookup([source], parent("a", generation=3), indices)] == ["x"]


def test_a_parent_without_the_field_of_its_selector_selects_nothing():
    source = kopf_outcomes.selected("v1", "configmaps", where={"spec.clusterName": "{spec.cluster}"})
    assert source.keys(parent("a")) == []
    assert source.keys(parent("a", cluster="c1")) != []


async def test_a_childs_change_wakes_only_its_parent_and_its_former_one(selector):
    woken = {name: asyncio.Event() for name in "abc"}
    forgets = [objects.wait(selector.wake_keys(parent(name)), event) for name, event in woken.items()]
    try:
        objects.changed(child("j", labels={CLUSTER: "a"}))
        assert [name for name, event in woken.items() if event.is_set()] == ["a"]  # was: every parent
        woken["a"].clear()
        objects.changed(child("j", labels={CLUSTER: "b"}))  # moved from a to b: both must look
        assert [name for name, event in woken.items() if event.is_set()] == ["a", "b"]
    finally:
        for forget in forgets:
            forget()


def test_kopf_filters_the_children_by_the_presence_of_the_computed_labels():
    registry = kopf.OperatorRegistry()
    source = kopf_outcomes.selected("batch/v1", "jobs", labels={CLUSTER: "{metadata.name}", "tier": "db"})

    @kopf_outcomes.depends_on_objects(source, registry=registry)
    def fn(**_: object) -> None: ...

    [handler] = registry._indexing.get_all_handlers()
    assert handler.labels == {CLUSTER: kopf.PRESENT, "tier": "db"}


@pytest.mark.parametrize("make, message", [
    (lambda: kopf_outcomes.selected("v1", "pods", labels={"a": "{metadata.name"}), "unbalanced braces"),
    (lambda: kopf_outcomes.selected("v1", "pods", labels={"a": "{spec..x}"}), "is not a field path"),
    (lambda: kopf_outcomes.selected("v1", "pods", where={"spec.x": None}), "must be a value or a template"),
    (lambda: kopf_outcomes.selected("v1", "pods"), "give labels"),
])
def test_wrong_selections_are_clear_errors(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_references_to_other_namespaces_are_found_in_the_index():
    source = kopf_outcomes.referenced("v1", "secrets", field="spec.secretRef")
    secrets = [child("creds", namespace="vault"), child("creds"), child("tls", namespace="certs")]
    indices = kopf_index(source, *secrets)

    def names(**spec: Any) -> list[str]:
        return [f"{ref.namespace}/{ref.name}" for ref in objects.lookup([source], parent("p", **spec), indices)]

    assert names(secretRef={"name": "creds", "namespace": "vault"}) == ["vault/creds"]
    assert names(secretRef={"name": "creds"}) == ["ns/creds"]  # no namespace: the parent's own
    assert names(secretRef="vault/creds") == ["vault/creds"]
    assert names(secretRef=["certs/tls", {"name": "creds", "namespace": "vault"}]) == ["certs/tls", "vault/creds"]
    assert names(secretRef={"namespace": "vault"}) == []  # no name: nothing referenced


async def test_a_referenced_object_in_another_namespace_wakes_its_parent():
    source = kopf_outcomes.referenced("v1", "secrets", field="spec.secretRef")
    objects._sources[source.index] = source
    woken = asyncio.Event()
    forget = objects.wait(source.wake_keys(parent("p", secretRef="vault/creds")), woken)
    try:
        objects.changed(child("creds"))  # the same name in the parent's namespace: not it
        assert not woken.is_set()
        objects.changed(child("creds", namespace="vault"))
        assert woken.is_set()
    finally:
        forget()
        del objects._sources[source.index]
