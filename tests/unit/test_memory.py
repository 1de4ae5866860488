"""Per-state handler memory: the digest, reading garbage, writing into the pending patch."""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kopf_outcomes import memory
from kopf_outcomes.memory import MEMORY_ANNOTATION, RELEASE_ANNOTATION
from kopf_outcomes.memory import MemoryRecord as Record
from tests.unit.conftest import Collector, digest

BODY: dict[str, Any] = {
    "apiVersion": "kopf.dev/v1",
    "kind": "KopfExample",
    "metadata": {
        "name": "example",
        "namespace": "default",
        "uid": "uid-1",
        "resourceVersion": "100",
        "generation": 3,
        "labels": {"app": "demo"},
        "annotations": {"example.com/owner": "team-a"},
        "finalizers": ["kopf.zalando.org/KopfFinalizerMarker"],
    },
    "spec": {"size": 1, "field": "value"},
    "status": {"deletion": "requested"},
}


def body_with(**changes: Any) -> dict[str, Any]:
    """BODY with top-level stanzas replaced and metadata fields merged."""
    body = copy.deepcopy(BODY)
    metadata = changes.pop("metadata", {})
    body.update(changes)
    body["metadata"].update(metadata)
    return body


def annotated(**annotations: str) -> dict[str, Any]:
    return body_with(metadata={"annotations": {**BODY["metadata"]["annotations"], **annotations}})


def record(outcome: Any = "pending", digest: str = "d1", reason: str = "waiting") -> Record:
    return Record(digest=digest, outcome=outcome, reason=reason)


# --- digest: stable and sensitive ----------------------------------------------------------------


def test_digest_is_stable_for_equal_state() -> None:
    assert digest(BODY) == digest(copy.deepcopy(BODY))
    assert len(digest(BODY)) == 16
    int(digest(BODY), 16)  # hexadecimal


def test_digest_ignores_key_order() -> None:
    reordered = body_with(spec={"field": "value", "size": 1})
    assert list(reordered["spec"]) != list(BODY["spec"])
    assert digest(reordered) == digest(BODY)


@pytest.mark.parametrize(
    "changed",
    [
        body_with(spec={"size": 2, "field": "value"}),
        body_with(spec={"size": 1}),
        body_with(spec={"size": "1", "field": "value"}),
        body_with(metadata={"labels": {"app": "other"}}),
        body_with(metadata={"labels": {}}),
        annotated(**{"example.com/owner": "team-b"}),
        annotated(**{"example.org/new": "x"}),
        annotated(plain="no-prefix"),
        annotated(**{"notkopf.zalando.org/x": "lookalike of Kopf's prefix"}),
        body_with(status={"deletion": "done"}),
        body_with(status={"deletion": "requested", "conditions": []}),
        body_with(status={"deletion": "requested", "build": {"progress": 50}}),
        body_with(status={"deletion": "requested", "build": {"progress": {"step": {"done": 3}}}}),
        body_with(status={"deletion": "requested", "build": {"dummy": "x"}}),
    ],
    ids=[
        "spec-value", "spec-key", "spec-type", "label-value", "labels-emptied", "foreign-annotation",
        "new-annotation", "unprefixed-annotation", "lookalike-prefix", "status-value", "status-key",
        "a-progress-of-its-own", "a-progress-not-kopfs-records", "a-dummy-alone",
    ],
)
def test_digest_differs_for_relevant_changes(changed: dict[str, Any]) -> None:
    assert digest(changed) != digest(BODY)


@pytest.mark.parametrize(
    "changed",
    [
        body_with(metadata={"resourceVersion": "101", "generation": 4, "name": "renamed"}),
        body_with(metadata={"finalizers": []}),
        body_with(metadata={"deletionTimestamp": "2024-01-01T00:00:00Z"}),
        body_with(kind="Other", apiVersion="other/v2"),
        annotated(**{"kopf.zalando.org/last-handled-configuration": "{}"}),
        annotated(**{"kopf.zalando.org/touch-dummy": "2024"}),
        annotated(**{"kopf.zalando.org/delete_fn": '{"retries": 1}'}),
        annotated(**{"my-op.kopf.zalando.org/delete_fn": "{}"}),
        annotated(**{"a.b.kopf.zalando.org/x": "{}"}),
        annotated(**{"kubectl.kubernetes.io/last-applied-configuration": '{"spec": {}}'}),
        annotated(**{MEMORY_ANNOTATION: "{}"}),
        annotated(**{RELEASE_ANNOTATION: "h"}),
        annotated(**{"outcomes.kopf.zalando.org/anything": "x"}),
        annotated(**{"example.net/kopf-managed": "yes", "example.net/delete_fn": "{}"}),
        body_with(status={"deletion": "requested", "kopf": {"progress": {"h": {"retries": 1}}}}),
        body_with(status={"deletion": "requested", "b-op": {"progress": {"h": {"started": "t", "retries": 1}},
                                                            "dummy": "t"}}),
        body_with(status={"deletion": "requested", "b-op": {"last-handled-configuration": '{"spec":{}}'}}),
    ],
    ids=[
        "metadata-bookkeeping", "finalizers", "deletion-timestamp", "kind", "kopf-diffbase",
        "kopf-dummy", "kopf-progress", "other-kopf-operator", "nested-kopf-prefix",
        "kubectl-last-applied", "our-memory", "our-release", "our-prefix", "kopf-managed-prefix",
        "status-kopf", "another-operators-status-progress", "another-operators-status-diffbase",
    ],
)
def test_digest_ignores_what_operators_write(changed: dict[str, Any]) -> None:
    assert digest(changed) == digest(BODY)


def test_kopf_managed_marker_only_hides_its_own_prefix() -> None:
    marked = annotated(**{"example.net/kopf-managed": "yes", "example.net/progress": "1"})
    assert digest(marked) == digest(BODY)
    assert digest({**marked, "metadata": {
        **marked["metadata"],
        "annotations": {**marked["metadata"]["annotations"], "example.org/progress": "1"},
    }}) != digest(BODY)


@pytest.mark.parametrize(
    ("empty", "absent"),
    [
        ({"status": {}}, {}),
        ({"status": {"kopf": {"progress": {}}}}, {}),
        ({"spec": {}}, {}),
        ({"spec": None}, {}),
        ({"metadata": {"labels": {}}}, {"metadata": {}}),
        ({"metadata": {"annotations": {}}}, {"metadata": {}}),
        ({"metadata": {"annotations": {"kopf.zalando.org/x": "y"}}}, {"metadata": {}}),
        ({"metadata": {}}, {}),
    ],
)
def test_an_emptied_stanza_equals_an_absent_one(empty: dict[str, Any], absent: dict[str, Any]) -> None:
    assert digest(empty) == digest(absent)


def test_excluded_paths_are_ignored() -> None:
    base = body_with(status={"deletion": "requested", "h": {"result": 1}, "conditions": ["a"]})
    changed = body_with(status={"deletion": "requested", "h": {"result": 2}, "conditions": ["b"]})
    excluded = (("status", "h"), ("status", "conditions"))
    assert digest(base) != digest(changed)
    assert digest(base, excluded=excluded) == digest(changed, excluded=excluded)
    # Not a blanket exclusion: other status fields still count.
    moved = body_with(status={"deletion": "done", "h": {"result": 2}, "conditions": ["b"]})
    assert digest(moved, excluded=excluded) != digest(base, excluded=excluded)


def test_excluded_paths_may_be_deep_and_may_name_metadata() -> None:
    base = body_with(metadata={"labels": {"app": "demo", "heartbeat": "1"}},
                     status={"a": {"b": 1, "c": 1}})
    changed = body_with(metadata={"labels": {"app": "demo", "heartbeat": "2"}},
                        status={"a": {"b": 2, "c": 1}})
    excluded = (("metadata", "labels", "heartbeat"), ("status", "a", "b"))
    assert digest(base, excluded=excluded) == digest(changed, excluded=excluded)
    still = body_with(metadata={"labels": {"app": "demo", "heartbeat": "2"}},
                      status={"a": {"b": 2, "c": 2}})
    assert digest(still, excluded=excluded) != digest(base, excluded=excluded)


def test_excluding_the_only_field_equals_an_absent_stanza() -> None:
    only = body_with(status={"h": {"message": "done"}})
    without = {k: v for k, v in BODY.items() if k != "status"}
    assert digest(only, excluded=[("status", "h")]) == digest(without)


@pytest.mark.parametrize(
    "path", [("status", "deletion", "deeper"), ("status", "missing", "x"), ("nothing",), ()],
)
def test_excluded_paths_through_non_mappings_or_missing_keys_are_harmless(
    path: tuple[str, ...],
) -> None:
    assert digest(BODY, excluded=[path]) == digest(BODY)


def test_depends_on_narrows_the_digest() -> None:
    narrow = ["spec.size", "status.deletion"]
    unrelated = body_with(spec={"size": 1, "field": "other"}, metadata={"labels": {"x": "y"}})
    assert digest(unrelated, depends_on=narrow) == digest(BODY, depends_on=narrow)
    assert digest(unrelated) != digest(BODY)
    resized = body_with(spec={"size": 2, "field": "value"})
    assert digest(resized, depends_on=narrow) != digest(BODY, depends_on=narrow)
    done = body_with(status={"deletion": "done"})
    assert digest(done, depends_on=narrow) != digest(BODY, depends_on=narrow)


def test_depends_on_can_name_metadata_and_tolerates_missing_paths() -> None:
    assert digest(BODY, depends_on=["metadata.labels.app"]) != digest(
        body_with(metadata={"labels": {"app": "other"}}), depends_on=["metadata.labels.app"]
    )
    # Missing paths and paths through scalars read as None, and equally so.
    assert digest(BODY, depends_on=["spec.size.deeper"]) == digest(
        body_with(spec=None), depends_on=["spec.size.deeper"]
    )
    assert digest(BODY, depends_on=["spec.nope"]) != digest(
        body_with(spec={"nope": 0}), depends_on=["spec.nope"]
    )


def test_depends_on_does_not_cover_kopf_annotations_unless_asked() -> None:
    kopf_written = annotated(**{"kopf.zalando.org/touch-dummy": "x"})
    assert digest(kopf_written, depends_on=["spec"]) == digest(BODY, depends_on=["spec"])


def test_digest_tolerates_non_json_values() -> None:
    import datetime

    body = body_with(spec={"when": datetime.datetime(2024, 1, 1)})
    assert digest(body) == digest(copy.deepcopy(body))


def test_digest_never_mutates_the_body() -> None:
    body = body_with(
        metadata={
            "labels": {"app": "demo", "heartbeat": "1"},
            "annotations": {
                "example.com/x": "y", "kopf.zalando.org/h": "{}", MEMORY_ANNOTATION: "{}",
                "example.net/kopf-managed": "yes",
            },
        },
        status={"kopf": {"progress": {}}, "h": {"r": 1}, "a": {"b": {"c": 1}, "d": 2}},
    )
    before = copy.deepcopy(body)
    digest(body, excluded=[("status", "h"), ("status", "a", "b", "c"),
                                  ("metadata", "labels", "heartbeat"), ("spec", "size")])
    digest(body, depends_on=["status.a.b", "spec"])
    digest(body)
    assert body == before


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=10,
)
bodies = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries({
            "labels": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
            "annotations": st.dictionaries(
                st.sampled_from(["example.com/a", "kopf.zalando.org/b", "x.kopf.zalando.org/c",
                                 MEMORY_ANNOTATION, "plain"]),
                st.text(max_size=5), max_size=4),
        }),
        "spec": st.dictionaries(st.text(max_size=5), json_values, max_size=3),
        "status": st.dictionaries(st.sampled_from(["kopf", "h", "conditions", "x"]), json_values,
                                  max_size=3),
    }
)


@settings(max_examples=60, deadline=None)
@given(body=bodies)
def test_digest_property_pure_and_stable(body: dict[str, Any]) -> None:
    before = copy.deepcopy(body)
    first = digest(body, excluded=[("status", "h"), ("status", "x", "y")])
    assert body == before
    assert digest(before, excluded=[("status", "h"), ("status", "x", "y")]) == first


# --- read: garbage in every shape --------------------------------------------------------------


def with_memory(raw: object, uid: str = "uid-1") -> dict[str, Any]:
    return {"metadata": {"uid": uid, "annotations": {MEMORY_ANNOTATION: raw}}}


VALID = json.dumps({"h": record(), "other": record("retained", "d2", "broken")})


def test_read_absent_memory(logger: logging.Logger, collector: Collector) -> None:
    assert memory.read({}, logger) == {}
    assert memory.read({"metadata": {}}, logger) == {}
    assert memory.read({"metadata": {"annotations": {"x": "y"}}}, logger) == {}
    assert collector.records == []


def test_read_valid_memory(logger: logging.Logger, collector: Collector) -> None:
    assert memory.read(with_memory(VALID), logger) == {
        "h": record(), "other": record("retained", "d2", "broken"),
    }
    assert memory.read(with_memory("{}"), logger) == {}
    assert collector.records == []


@pytest.mark.parametrize(
    ("raw", "explanation"),
    [
        ("not json", "not JSON"),
        ("", "not JSON"),
        ("{", "not JSON"),
        ("[1, 2]", "expected a JSON object of handler ids, got list"),
        ("null", "expected a JSON object of handler ids, got NoneType"),
        ('"text"', "expected a JSON object of handler ids, got str"),
        ('{"h": "pending"}', "the record of handler 'h' is malformed"),
        ('{"h": {"digest": "d1", "outcome": "pending"}}', "the record of handler 'h' is malformed"),
        ('{"h": {"outcome": "pending", "reason": ""}}', "the record of handler 'h' is malformed"),
        ('{"h": {"digest": "d", "outcome": "done", "reason": ""}}', "record of handler 'h' is malformed"),
        ('{"h": {"digest": 1, "outcome": "pending", "reason": ""}}', "record of handler 'h' is malformed"),
        ('{"h": {"digest": "d", "outcome": "pending", "reason": 5}}', "record of handler 'h' is malformed"),
        ('{"h": {"digest": "d", "outcome": "pending", "reason": "", "before_status": 5}}',
         "record of handler 'h' is malformed"),
        (5, "expected a JSON string, got int"),
        (True, "expected a JSON string, got bool"),
    ],
)
def test_read_garbage_is_no_memory_and_one_warning(
    raw: Any, explanation: str, logger: logging.Logger, collector: Collector
) -> None:
    assert memory.read(with_memory(raw), logger) == {}
    assert memory.read(with_memory(raw), logger) == {}
    assert len(collector.records) == 1
    [warning] = collector.records
    assert warning.levelno == logging.WARNING
    assert MEMORY_ANNOTATION in warning.getMessage()
    assert explanation in warning.getMessage()
    assert "start with no memory" in warning.getMessage()


def test_garbage_is_reported_once_per_uid_and_raw_value(
    logger: logging.Logger, collector: Collector
) -> None:
    for _ in range(3):
        memory.read(with_memory("garbage", uid="u1"), logger)
        memory.read(with_memory("garbage", uid="u2"), logger)
        memory.read(with_memory("other garbage", uid="u1"), logger)
    assert len(collector.records) == 3
    # Valid memory in between neither reports nor resets the once-only rule.
    memory.read(with_memory(VALID, uid="u1"), logger)
    memory.read(with_memory("garbage", uid="u1"), logger)
    assert len(collector.records) == 3


# --- write -------------------------------------------------------------------------------------


def written(patch: dict[str, Any]) -> Any:
    return patch["metadata"]["annotations"][MEMORY_ANNOTATION]


def test_write_into_an_empty_patch(logger: logging.Logger) -> None:
    patch: dict[str, Any] = {}
    memory.write(BODY, patch, "h", record(), logger)
    assert json.loads(written(patch)) == {"h": record()}
    # Compact and canonical: equal memory is an equal string.
    assert written(patch) == json.dumps({"h": record()}, sort_keys=True, separators=(",", ":"))


def test_write_keeps_other_handlers_records_from_the_body(logger: logging.Logger) -> None:
    body = with_memory(json.dumps({"a": record(digest="da")}))
    patch: dict[str, Any] = {}
    memory.write(body, patch, "b", record(digest="db"), logger)
    assert json.loads(written(patch)) == {"a": record(digest="da"), "b": record(digest="db")}


def test_write_merges_into_a_pending_patch(logger: logging.Logger) -> None:
    body = with_memory(json.dumps({"a": record(digest="old")}))
    patch: dict[str, Any] = {"metadata": {"annotations": {"other/x": "keep"}}, "status": {"s": 1}}
    memory.write(body, patch, "a", record(digest="new"), logger)
    memory.write(body, patch, "b", record(digest="db"), logger)
    assert json.loads(written(patch)) == {"a": record(digest="new"), "b": record(digest="db")}
    assert patch["metadata"]["annotations"]["other/x"] == "keep"
    assert patch["status"] == {"s": 1}


def test_write_removes_a_record(logger: logging.Logger) -> None:
    body = with_memory(json.dumps({"a": record(), "b": record()}))
    patch: dict[str, Any] = {}
    memory.write(body, patch, "a", None, logger)
    assert json.loads(written(patch)) == {"b": record()}


def test_write_none_when_the_last_record_goes(logger: logging.Logger) -> None:
    body = with_memory(json.dumps({"a": record()}))
    patch: dict[str, Any] = {}
    memory.write(body, patch, "a", None, logger)
    assert patch == {"metadata": {"annotations": {MEMORY_ANNOTATION: None}}}


def test_write_after_a_pending_removal_starts_afresh(logger: logging.Logger) -> None:
    body = with_memory(json.dumps({"a": record()}))
    patch: dict[str, Any] = {}
    memory.write(body, patch, "a", None, logger)
    memory.write(body, patch, "b", record(digest="db"), logger)
    assert json.loads(written(patch)) == {"b": record(digest="db")}


@pytest.mark.parametrize(
    ("body", "handler_id", "value"),
    [
        (with_memory(json.dumps({"a": record()})), "a", record()),
        (with_memory(json.dumps({"a": record()})), "b", None),
        (BODY, "a", None),
        ({}, "a", None),
    ],
    ids=["same-record", "absent-removed", "no-memory-removed", "empty-body"],
)
def test_write_nothing_when_unchanged(
    body: dict[str, Any], handler_id: str, value: Record | None, logger: logging.Logger
) -> None:
    patch: dict[str, Any] = {}
    memory.write(body, patch, handler_id, value, logger)
    assert patch == {}


def test_write_nothing_when_the_pending_patch_already_has_it(logger: logging.Logger) -> None:
    patch: dict[str, Any] = {}
    memory.write(BODY, patch, "a", record(), logger)
    before = copy.deepcopy(patch)
    memory.write(BODY, patch, "a", record(), logger)
    assert patch == before


def test_write_over_garbage_replaces_it(logger: logging.Logger, collector: Collector) -> None:
    patch: dict[str, Any] = {}
    memory.write(with_memory("garbage"), patch, "a", record(), logger)
    assert json.loads(written(patch)) == {"a": record()}
    assert len(collector.messages(logging.WARNING)) == 1


def test_write_does_not_mutate_the_body(logger: logging.Logger) -> None:
    body = with_memory(json.dumps({"a": record()}))
    before = copy.deepcopy(body)
    memory.write(body, {}, "b", record(), logger)
    memory.write(body, {}, "a", None, logger)
    assert body == before


# --- release_requested -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("h", True),
        ("a, h", True),
        ("a,h", True),
        (" h ", True),
        ("*", True),
        ("a, *", True),
        ("a", False),
        ("hh", False),
        ("h2, a", False),
        ("", False),
        (", ,", False),
        ("H", False),
        (5, False),
        (None, False),
        (["h"], False),
    ],
)
def test_release_requested(value: Any, expected: bool) -> None:
    body = {"metadata": {"annotations": {RELEASE_ANNOTATION: value}}}
    assert memory.release_requested(body, "h") is expected


def test_release_not_requested_without_the_annotation() -> None:
    assert memory.release_requested({}, "h") is False
    assert memory.release_requested(BODY, "h") is False
