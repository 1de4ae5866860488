"""Kopf's finalizer release, kept while a deletion handler's memory waits or the object is another shard's."""
from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Iterator
from typing import Any

import kopf
import pytest
from kopf._cogs.structs import finalizers

from kopf_outcomes import shards
from kopf_outcomes._kopf import held
from kopf_outcomes._kopf.internals import operator_registry
from kopf_outcomes.memory import DEFAULT_KEYS, RELEASE_ANNOTATION, keys_for

FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"


def _new_kopf(body: dict[str, Any], finalizer: str) -> None:
    """Kopf >= 1.38's allow_deletion (a function of the body), where the installed Kopf is older
    and adds to the cycle's patch instead (that form: test_..._kopf_before_1_38)."""
    while finalizer in body.get("metadata", {}).get("finalizers", []):
        body["metadata"]["finalizers"].remove(finalizer)


_OLD_FORM = "patch" in inspect.signature(finalizers.allow_deletion).parameters
allow_deletion = held.wrap(_new_kopf if _OLD_FORM else finalizers.allow_deletion)


@pytest.fixture(autouse=True)
def _no_shard() -> Iterator[None]:
    shards.declared = None
    held._told.clear()
    yield
    shards.declared = None


def body(records: dict[str, Any] | None, *, labels: dict[str, str] | None = None,
         annotations: dict[str, str] | None = None) -> dict[str, Any]:
    found = dict(annotations or {})
    if records is not None:
        found[DEFAULT_KEYS.memory] = json.dumps(records)
    return {"metadata": {"name": "x", "namespace": "ns", "uid": "u1", "finalizers": [FINALIZER, "other/f"],
                         "labels": labels or {}, "annotations": found}}


def record(outcome: str) -> dict[str, Any]:
    return {"digest": "d", "outcome": outcome, "reason": "r"}


@pytest.mark.parametrize("outcome", ["pending", "retry", "retained"])
def test_a_waiting_handler_keeps_the_finalizer_and_says_so_once(outcome: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, "kopf_outcomes")
    for _ in range(2):
        found = body({"delete_fn": record(outcome)})
        allow_deletion(found, finalizer=FINALIZER)
        assert found["metadata"]["finalizers"] == [FINALIZER, "other/f"]
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    assert "ns/x" in caplog.records[0].message and f"{RELEASE_ANNOTATION}=delete_fn" in caplog.records[0].message


@pytest.mark.parametrize("records", [None, {}, {"delete_fn": record("success")}, {"delete_fn": record("fatal")}])
def test_nothing_waiting_releases_as_kopf_does(records: dict[str, Any] | None) -> None:
    found = body(records)
    allow_deletion(found, finalizer=FINALIZER)
    assert found["metadata"]["finalizers"] == ["other/f"]


def test_an_unreadable_memory_holds_until_a_person_releases_with_a_star() -> None:
    found = body(None, annotations={DEFAULT_KEYS.memory: "{garbage"})
    allow_deletion(found, finalizer=FINALIZER)
    assert found["metadata"]["finalizers"] == [FINALIZER, "other/f"]
    found = body(None, annotations={DEFAULT_KEYS.memory: "{garbage", RELEASE_ANNOTATION: "*"})
    allow_deletion(found, finalizer=FINALIZER)
    assert found["metadata"]["finalizers"] == ["other/f"]
    assert RELEASE_ANNOTATION not in found["metadata"]["annotations"]  # answered: it goes with the finalizer


def test_a_record_written_for_another_object_holds_nothing() -> None:
    found = body({"delete_fn": {**record("pending"), "uid": "u0"}})
    allow_deletion(found, finalizer=FINALIZER)
    assert found["metadata"]["finalizers"] == ["other/f"]


@pytest.mark.parametrize("release", ["delete_fn", "*", "other_fn, delete_fn"])
def test_a_persons_release_annotation_lets_it_go(release: str) -> None:
    found = body({"delete_fn": record("pending")}, annotations={RELEASE_ANNOTATION: release})
    allow_deletion(found, finalizer=FINALIZER)
    assert found["metadata"]["finalizers"] == ["other/f"]


def test_another_operators_memory_holds_nothing() -> None:
    found = body(None, annotations={keys_for("b.example.com/f").memory: json.dumps({"delete_fn": record("pending")})})
    allow_deletion(found, finalizer=FINALIZER)
    assert found["metadata"]["finalizers"] == ["other/f"]


def old_kopf(*, body: dict[str, Any], patch: dict[str, Any], finalizer: str) -> None:
    patch.setdefault("metadata", {})["finalizers"] = ["other/f"]


def test_kopf_before_1_38_releases_as_stock_kopf_does_after_a_handler_ran() -> None:
    """Before 1.38, allow_deletion adds to the cycle's merge-patch before our memory's conclusion is
    in it, so the memory cannot tell a handler concluding now from one that waits: a known limit."""
    patch: dict[str, Any] = {"status": {"kopf": {"progress": {"delete_fn": None}}}}  # a handler ran
    held.wrap(old_kopf)(body=body({"delete_fn": record("pending")}), patch=patch, finalizer=FINALIZER)
    assert patch["metadata"]["finalizers"] == ["other/f"]


@pytest.mark.xfail(strict=True, reason=(
    "a known limit before Kopf 1.38: Kopf also passes an empty patch in the cycle where the handler concludes, "
    "so the body's memory cannot be read as the cycle's; holding there held every concluded parent on Kopf 1.37"))
def test_kopf_before_1_38_holds_where_no_handler_ran() -> None:
    """An empty patch: no handler ran in the cycle (none matches the object any more), so the body's
    memory is the cycle's, and a waiting handler holds the finalizer."""
    patch: dict[str, Any] = {}
    held.wrap(old_kopf)(body=body({"delete_fn": record("pending")}), patch=patch, finalizer=FINALIZER)
    assert patch == {}


def test_only_the_operators_deletion_handlers_hold_it_and_their_subhandlers() -> None:
    registry = kopf.OperatorRegistry()

    @kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, id="delete_fn")
    def delete_fn(**_: Any) -> None: ...

    @kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, optional=True, id="optional_fn")
    def optional_fn(**_: Any) -> None: ...

    @kopf.on.create("kopf.dev", "v1", "kopfexamples", registry=registry, id="create_fn")
    def create_fn(**_: Any) -> None: ...

    token = operator_registry.set(registry)
    try:
        for released in ({"create_fn": record("pending")}, {"optional_fn": record("pending")},
                         {"removed_from_the_code": record("pending")}):
            found = body(released)
            allow_deletion(found, finalizer=FINALIZER)
            assert found["metadata"]["finalizers"] == ["other/f"], released
        for kept in ({"delete_fn": record("pending")}, {"delete_fn/step": record("retained")}):
            found = body(kept)
            allow_deletion(found, finalizer=FINALIZER)
            assert found["metadata"]["finalizers"] == [FINALIZER, "other/f"], kept
    finally:
        operator_registry.reset(token)


def test_a_shard_removes_no_finalizer_of_another_shards_object(caplog: pytest.LogCaptureFixture) -> None:
    label = "example.com/shard"
    assert shards.shard(label, "a") == {label: "a"}
    for labels in ({label: "b"}, {}):
        found = body(None, labels=labels)
        allow_deletion(found, finalizer=FINALIZER)
        assert found["metadata"]["finalizers"] == [FINALIZER, "other/f"]
    found = body(None, labels={label: "a"})
    allow_deletion(found, finalizer=FINALIZER)
    assert found["metadata"]["finalizers"] == ["other/f"]
    assert caplog.records == []  # another shard's object is the normal case: nothing to say


@pytest.mark.parametrize("label, value, says", [
    ("", "a", "the label must be a non-empty string"),
    ("example.com/shard", None, "the value of the label 'example.com/shard' must be a non-empty string"),
    ("example.com/shard", "", "must be a non-empty string"),
    ("example.com/shard", " a", "' a' is not a Kubernetes label value for 'example.com/shard'"),
    ("example.com/shard", "a/b", "'a/b' is not a Kubernetes label value"),
    ("Example.com/shard", "a", "'Example.com/shard' is not a Kubernetes label key"),
    ("example.com/-shard", "a", "is not a Kubernetes label key"),
])
def test_a_bad_shard_is_refused_with_what_is_wrong(label: str, value: Any, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        shards.shard(label, value)
    assert shards.declared is None


def test_one_process_is_one_shard() -> None:
    shards.shard("example.com/shard", "a")
    assert shards.shard("example.com/shard", "a") == {"example.com/shard": "a"}  # again: the same
    with pytest.raises(ValueError, match="already the shard example.com/shard=a"):
        shards.shard("example.com/shard", "b")
