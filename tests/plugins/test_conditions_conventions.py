"""The conditions plugin's own logic: type names, transitions, the summary, others' conditions kept."""
from __future__ import annotations

import dataclasses
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
                      options=HandlerOptions(**options), logger=logging.getLogger("test"), siblings={})


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
        "kubectl annotate --overwrite kopfexamples.kopf.dev x -n ns outcomes.kopf.zalando.org/release=delete_fn")


def test_handlers_without_a_cause_reason_write_nothing():
    patch: dict = {}
    kopf_outcomes_observe_outcome(run(body(conditions=[]), reason=None), Success(), patch)
    assert patch == {}


def test_the_release_annotation_is_the_retaining_operators_own():
    from kopf_outcomes import memory

    mine, other = memory.keys_for("my-op.example.com/finalizer"), memory.keys_for(None)
    record = {"digest": "d", "outcome": "retained", "reason": "broken", "stamp": "a1b2c3"}
    body_ = body(conditions=[])
    body_["metadata"]["finalizers"] = [memory.DEFAULT_FINALIZER, "my-op.example.com/finalizer"]
    body_["metadata"]["annotations"] = {other.memory: '{"delete_fn": {"digest": "d", "outcome": "pending", '
                                                      '"reason": "x"}}'}
    patch = {"metadata": {"annotations": {mine.memory: __import__("json").dumps({"delete_fn": record})}}}
    kopf_outcomes_observe_outcome(run(body_, handler="delete_fn", reason="delete"),
                                  Fatal("broken", on_delete="retain"), patch)
    [condition, _] = patch["status"]["conditions"]
    assert condition["message"].endswith(f" {mine.release}=delete_fn@a1b2c3")  # this retention's stamp
    assert mine.release != other.release


# metav1.Condition's validation (k8s.io/apimachinery/pkg/apis/meta/v1/types.go), as CRDs declare it.
QUALIFIED_TYPE = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                            r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")
REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


def within_limits(condition: dict) -> bool:
    prefix, _, name = condition["type"].rpartition("/")
    return (len(condition["type"]) <= 316 and len(name) <= 63 and len(prefix) <= 253
            and bool(QUALIFIED_TYPE.match(condition["type"]))
            and len(condition["reason"]) <= 1024 and bool(REASON.match(condition["reason"]))
            and len(condition["message"]) <= 32768)


def test_a_long_reason_is_cut_with_a_mark_in_the_handlers_condition_and_the_summary():
    """Issue 34, finding 5: a 40,000-character reason made messages the API server rejects."""
    written = observed(body(conditions=[]), Retry("x" * 40_000, delay=5))
    assert all(within_limits(c) for c in written)
    assert all(c["message"].endswith(" [truncated]") and len(c["message"]) == 32768 for c in written)


def test_a_long_handler_id_gives_a_valid_type_kept_apart_from_its_neighbours():
    long_a, long_b = "create_fn/" + "a" * 80 + "/x", "create_fn/" + "a" * 80 + "/y"
    kinds = {condition_type(long_a), condition_type(long_b)}
    assert len(kinds) == 2
    assert all(QUALIFIED_TYPE.match(kind) and len(kind) <= 63 and kind.endswith("Succeeded") for kind in kinds)


def test_a_reason_outside_the_pattern_is_made_one():
    from kopf_outcomes_conditions.conventions import reason
    assert reason("FinalizerRetained") == "FinalizerRetained"
    assert all(REASON.match(reason(text)) and len(reason(text)) <= 1024
               for text in ("1 bad reason!", "x" * 2000, "", ":::", "Ok,"))


def test_two_operators_with_one_handler_id_keep_their_conditions_and_summaries_apart():
    """Issue 34: the second operator's Success overwrote the first one's Pending, and the summary
    turned True while the first still waited (``kubectl wait`` returned early)."""
    other = "acme.example.com/cleanup"
    first = observed(body(conditions=[]), Pending("waiting for the callback"), handler="delete_fn", reason="delete")
    patch: dict = {}
    second_run = dataclasses.replace(run(body(conditions=first), handler="delete_fn", reason="delete"),
                                     finalizer=other)
    kopf_outcomes_observe_outcome(second_run, Success(), patch)
    written = {c["type"]: c for c in patch["status"]["conditions"]}
    assert written["DeleteFnSucceeded"]["status"] == "False"  # the default operator's, untouched
    assert written["HandlersSucceeded"]["status"] == "False"
    assert written["cleanup.acme.example.com/DeleteFnSucceeded"]["status"] == "True"
    assert written["cleanup.acme.example.com/HandlersSucceeded"]["status"] == "True"
    assert all(within_limits(c) for c in written.values())


def test_a_finalizer_that_is_no_dns_name_gets_a_digest_prefix():
    from kopf_outcomes_conditions.conventions import prefix
    assert prefix(None) == "" and prefix("kopf.zalando.org/KopfFinalizerMarker") == ""
    odd = prefix("example.com/My_Finalizer")
    assert odd.endswith(".outcomes.kopf.zalando.org") and QUALIFIED_TYPE.match(f"{odd}/X")
    assert prefix("example.com/My_Finalizer") != prefix("example.com/My_Other")


def test_a_type_under_the_longest_valid_finalizer_prefix_is_within_316_characters():
    """Issue 44, finding 7: a 253-character prefix and a 63-character name made 317 characters; the
    API allows 316 (metav1.Condition's type: maxLength 316) and rejected the whole status PATCH."""
    from kopf_outcomes_conditions.conventions import prefix
    domain = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 59])  # 251 characters
    finalizer = f"{domain}/x"
    assert len(prefix(finalizer)) == 253
    kinds = {condition_type(f"create_fn/{'item' * 30}{n}", finalizer) for n in range(2)}
    assert len(kinds) == 2  # kept apart by their digests
    for kind in kinds:
        own, _, name = kind.rpartition("/")
        assert len(kind) <= 316 and len(own) <= 253 and len(name) <= 63 and QUALIFIED_TYPE.match(kind)
