"""The conditions plugin's own logic: type names, transitions, the summary, others' conditions kept."""
from __future__ import annotations

import logging
import re

import pytest
from kopf_outcomes_conditions import kopf_outcomes_observe_outcome
from kopf_outcomes_conditions.conventions import condition_type

from kopf_outcomes import Fatal, HandlerOptions, HandlerRun, Pending, ResourceRef, Retry, Success

# metav1.Condition's validation of a type without a domain prefix.
CONDITION_TYPE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


@pytest.mark.parametrize("handler_id, expected", [
    ("delete_fn", "DeleteFnSucceeded"), ("create_fn/sub-1", "CreateFnSub1Succeeded"),
    ("update_fn.spec.size", "UpdateFnSpecSizeSucceeded"), ("1st", "Handler1stSucceeded"),
    ("__", "HandlerSucceeded"),
])
def test_types_are_camel_case_and_valid(handler_id, expected):
    assert condition_type(handler_id) == expected
    assert CONDITION_TYPE.match(expected)


def run(body: dict, handler: str = "create_fn", reason: str = "create", **options) -> HandlerRun:
    return HandlerRun(handler_id=handler, reason=reason, resource=ResourceRef("kopf.dev", "v1", "kopfexamples"),
                      body=body, retry=2, runtime=0.0, deleting=reason == "delete",
                      options=HandlerOptions(**options), logger=logging.getLogger("test"))


def body(generation: int = 1, conditions: list | None = None) -> dict:
    return {"metadata": {"name": "x", "namespace": "ns", "generation": generation},
            "status": {"conditions": conditions} if conditions is not None else {}}


def observed(body_: dict, outcome, **kwargs) -> list[dict]:
    patch: dict = {}
    kopf_outcomes_observe_outcome(run(body_, **kwargs), outcome, patch)
    return patch.get("status", {}).get("conditions")


def test_others_conditions_are_kept_and_ours_replaced_in_place():
    foreign = {"type": "Ready", "status": "False", "reason": "Failed", "message": "theirs"}
    first = observed(body(conditions=[foreign]), Pending("waiting"))
    assert [c["type"] for c in first] == ["Ready", "CreateFnSucceeded", "HandlersSucceeded"]
    assert first[0] == foreign
    second = observed(body(2, conditions=first), Success())
    assert [c["type"] for c in second] == ["Ready", "CreateFnSucceeded", "HandlersSucceeded"]
    assert second[2]["status"] == "True"  # the foreign "Failed" is not one of ours


def test_an_unchanged_condition_is_not_written_again():
    first = observed(body(conditions=[]), Pending("waiting"))
    assert observed(body(conditions=first), Pending("waiting")) is None


def test_a_new_generation_keeps_the_transition_time():
    old = observed(body(conditions=[]), Pending("waiting"))
    old = [dict(c, lastTransitionTime="2000-01-01T00:00:00Z") for c in old]
    new = observed(body(5, conditions=old), Pending("waiting"))
    assert [(c["observedGeneration"], c["lastTransitionTime"]) for c in new] == [(5, "2000-01-01T00:00:00Z")] * 2
    done = observed(body(6, conditions=new), Success())
    assert all(c["lastTransitionTime"] != "2000-01-01T00:00:00Z" for c in done)


def test_several_waiting_handlers_are_summarized_as_waiting():
    one = observed(body(conditions=[]), Pending("a"))
    two = observed(body(conditions=one), Retry("busy", delay=5), handler="update_fn", reason="update")
    summary = two[-1]
    assert (summary["type"], summary["status"], summary["reason"]) == ("HandlersSucceeded", "False", "Waiting")
    assert summary["message"].startswith("Waiting for 2 handler(s): CreateFn, UpdateFn. CreateFnSucceeded: ")
    assert two[1]["message"] == "Handler 'update_fn' failed temporarily (attempt 3): busy. It is retried in 5 s."


def test_messages_name_the_fields_and_the_recheck():
    [condition, _] = observed(body(conditions=[]), Pending("waiting", recheck=30), depends_on=("status.deletion",))
    assert condition["message"] == ("Handler 'create_fn' is pending: waiting. It runs again when any of "
                                    "status.deletion changes, and every 30 s.")


def test_fatal_is_retained_only_on_deletion():
    [created, _] = observed(body(conditions=[]), Fatal("broken", on_delete="retain"))
    [deleted, _] = observed(body(conditions=[]), Fatal("broken", on_delete="retain"), handler="delete_fn",
                            reason="delete")
    assert (created["reason"], deleted["reason"]) == ("Failed", "FinalizerRetained")
    assert deleted["message"].endswith(
        "kubectl annotate kopfexamples.kopf.dev x -n ns outcomes.kopf.zalando.org/release=delete_fn")


def test_handlers_without_a_cause_reason_write_nothing():
    patch: dict = {}
    kopf_outcomes_observe_outcome(run(body(conditions=[]), reason=None), Success(), patch)
    assert patch == {}


def test_the_release_annotation_is_the_retaining_operators_own():
    from kopf_outcomes import memory

    mine, other = memory.keys_for("my-op.example.com/finalizer"), memory.keys_for(None)
    record = {"digest": "d", "outcome": "retained", "reason": "broken"}
    body_ = body(conditions=[])
    body_["metadata"]["finalizers"] = [memory.DEFAULT_FINALIZER, "my-op.example.com/finalizer"]
    body_["metadata"]["annotations"] = {other.memory: '{"delete_fn": {"digest": "d", "outcome": "pending", '
                                                      '"reason": "x"}}'}
    patch = {"metadata": {"annotations": {mine.memory: __import__("json").dumps({"delete_fn": record})}}}
    kopf_outcomes_observe_outcome(run(body_, handler="delete_fn", reason="delete"),
                                  Fatal("broken", on_delete="retain"), patch)
    [condition, _] = patch["status"]["conditions"]
    assert condition["message"].endswith(f" {mine.release}=delete_fn")
    assert mine.release != other.release
