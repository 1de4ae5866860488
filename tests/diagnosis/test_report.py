"""why/stuck's own logic on synthetic objects: Kopf's storages, the memory, states, rendering."""
from __future__ import annotations

import datetime
import json

import kopf
import pytest

from kopf_outcomes import memory
from kopf_outcomes._kopf import requeue
from kopf_outcomes.diagnosis import progress, render
from kopf_outcomes.diagnosis.kube import Kind
from kopf_outcomes.diagnosis.report import report

KIND = Kind("kopf.dev", "v1", "kopfexamples", "KopfExample", namespaced=True)
NOW = datetime.datetime(2026, 12, 2, 12, 0, 0, tzinfo=datetime.timezone.utc)


def body(annotations: dict | None = None, status: dict | None = None, finalizers: list | None = None) -> dict:
    return {"metadata": {"name": "x", "namespace": "ns", "uid": "u", "annotations": annotations or {},
                         "finalizers": finalizers if finalizers is not None else [memory.DEFAULT_FINALIZER],
                         "deletionTimestamp": "2026-12-02T11:58:30Z"},
            "status": status or {}}


def kopf_progress(storage: kopf.ProgressStorage, handler_id: str, record: dict, into: dict) -> None:
    """Write a progress record exactly as Kopf does, into a body."""
    patch = kopf.Patch()
    storage.store(key=kopf.HandlerId(handler_id), record=record, body=kopf.Body(into), patch=patch)
    for key, value in (patch.get("metadata") or {}).get("annotations", {}).items():
        into["metadata"]["annotations"][key] = value
    merge(into["status"], patch.get("status") or {})


def merge(into: dict, patch: dict) -> None:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value


def test_states_from_memory_and_kopfs_progress_in_either_storage():
    for storage, options in ((kopf.AnnotationsProgressStorage(), {}),
                             (kopf.StatusProgressStorage(), {"storage": "status"}),
                             (kopf.AnnotationsProgressStorage(prefix="my.example.com"), {"prefix": "my.example.com"})):
        found = body()
        kopf_progress(storage, "create_fn/sub-1", {"started": "2026-12-02T11:58:30", "retries": 2,
                                                   "success": False, "failure": False, "message": "busy"}, found)
        kopf_progress(storage, "delete_fn", {"started": "2026-12-02T11:58:30", "retries": 1, "success": True,
                                             "failure": False}, found)
        got = report(KIND, found, now=NOW, **options)
        # Without a memory record to name it, a sub-handler's id is as Kopf's annotation key has it.
        sub = "create_fn/sub-1" if options.get("storage") == "status" else "create_fn.sub-1"
        assert {h["id"]: h["state"] for h in got["handlers"]} == {sub: "retrying", "delete_fn": "succeeded"}, options
        assert got["waitingSeconds"] == 90.0


def test_a_long_handler_id_is_found_through_kopfs_key_convention():
    found = body()
    long_id = "a_handler_with_a_very_long_name/and_a_sub_handler_with_an_even_longer_name"
    kopf_progress(kopf.AnnotationsProgressStorage(), long_id, {"retries": 1, "message": "m"}, found)
    record = memory.record(None, digest="d", outcome="pending", reason="waiting", parked=True, depends_on=None)
    found["metadata"]["annotations"][memory.MEMORY_ANNOTATION] = json.dumps({long_id: record})
    [handler] = report(KIND, found, now=NOW)["handlers"]
    assert (handler["id"], handler["state"], handler["progress"]["message"]) == (long_id, "pending", "m")


def test_retained_names_the_finalizer_and_the_operators_own_release_annotation():
    finalizer = "my-op.example.com/finalizer"
    keys = memory.keys_for(finalizer)
    record = memory.record(None, digest="d", outcome="retained", reason="lost", parked=True, depends_on=None,
                           stamp="a1b2c3")
    found = body({keys.memory: json.dumps({"delete_fn": record})}, finalizers=[finalizer, "other/one"])
    got = report(KIND, found, finalizer=finalizer, now=NOW)
    assert got["finalizers"] == [{"name": finalizer, "operator": True, "retainedBy": ["delete_fn"]},
                                 {"name": "other/one", "operator": False, "retainedBy": []}]
    assert got["handlers"][0]["release"] == (f"kubectl annotate --overwrite kopfexamples.kopf.dev x -n ns "
                                             f"{keys.release}=delete_fn@a1b2c3")  # this retention's stamp
    assert report(KIND, found, now=NOW)["handlers"] == []  # the default operator has no memory here


def test_garbage_memory_reads_as_none():
    found = body({memory.MEMORY_ANNOTATION: "{not json"})
    assert report(KIND, found, now=NOW)["handlers"] == []


@pytest.mark.parametrize("seconds, shown", [(None, "-"), (5, "5s"), (65, "1m5s"), (3725, "1h2m"), (90061, "1d1h")])
def test_durations_read_as_kubectl_ages(seconds, shown):
    assert render.duration(seconds) == shown


def test_stuck_explains_objects_without_progress():
    waiting = report(KIND, body(), now=NOW)
    foreign = report(KIND, body(finalizers=["other/one"]), now=NOW)
    text = render.stuck([waiting, foreign])
    assert "is the operator running?" in text.splitlines()[1]
    assert "held by other finalizers" in text.splitlines()[2]
    assert render.stuck([]) == "No object is being deleted with finalizers held."


def test_progress_read_ignores_what_is_not_progress():
    found = body({"kopf.zalando.org/last-handled-configuration": '{"spec": {}}',
                  "kopf.zalando.org/touch-dummy": "2026", "kopf.zalando.org/kopf-managed": "yes"})
    assert progress.read(found, []) == {}


def test_the_next_run_of_a_recheck_comes_from_the_memory_not_kopfs_stale_delay(monkeypatch):
    monkeypatch.setattr(requeue, "SPREAD", 0.0)  # the grid without its phase (tests/unit/test_requeue.py)
    # Pending(recheck=5) since 11:59:02; Kopf's `delayed` was written once, for the first recheck,
    # and is not updated while the conclusion holds (rechecks write nothing): at 12:00:00 it is
    # long past, while the grid since + k * 5 s says 12:00:02.
    found = body()
    kopf_progress(kopf.AnnotationsProgressStorage(), "delete_fn",
                  {"started": "2026-12-02T11:59:02", "delayed": "2026-12-02T11:59:07", "retries": 1,
                   "success": False, "failure": False, "message": "waiting"}, found)
    record = memory.record(None, digest="d", outcome="pending", reason="waiting", parked=False, depends_on=None,
                           recheck=5.0)
    record["since"] = "2026-12-02T11:59:02+00:00"
    found["metadata"]["annotations"][memory.MEMORY_ANNOTATION] = json.dumps({"delete_fn": record})
    got = report(KIND, found, now=NOW)
    assert got["handlers"][0]["nextRecheck"] == "2026-12-02T12:00:02+00:00"
    row = render.why(got).splitlines()[-1]
    assert row.split()[-1] == "2026-12-02T12:00:02Z", row
    # A moment later the next grid point, not the one that has passed.
    later = report(KIND, found, now=NOW + datetime.timedelta(seconds=3))
    assert later["handlers"][0]["nextRecheck"] == "2026-12-02T12:00:07+00:00"


def test_a_parked_pending_has_no_recheck():
    record = memory.record(None, digest="d", outcome="pending", reason="waiting", parked=True, depends_on=None)
    found = body({memory.MEMORY_ANNOTATION: json.dumps({"delete_fn": record})})
    assert report(KIND, found, now=NOW)["handlers"][0]["nextRecheck"] is None


def test_a_pending_under_an_escalation_shows_its_deadline():
    """Issue 34, finding 1: why shows when a time-based escalation gives the handler up."""
    found = body()
    kopf_progress(kopf.AnnotationsProgressStorage(), "delete_fn",
                  {"started": "2026-12-02T11:58:30", "retries": 1, "delayed": "2036-12-02T11:58:30",
                   "message": "waiting [parked by kopf-outcomes]"}, found)
    record = memory.record(None, digest="d", outcome="pending", reason="waiting", parked=True, depends_on=None,
                           deadline="2026-12-02T12:08:30+00:00")
    found["metadata"]["annotations"][memory.MEMORY_ANNOTATION] = json.dumps({"delete_fn": record})
    got = report(KIND, found, now=NOW)
    assert got["handlers"][0]["escalatesAt"] == "2026-12-02T12:08:30+00:00"
    assert "on any change; escalates at 2026-12-02T12:08:30Z" in render.why(got)


MALFORMED = ["{not json", "[1, 2]", '"a string"', "5"]


@pytest.mark.parametrize("value", MALFORMED)
def test_malformed_progress_in_an_annotation_is_reported_for_its_handler_and_the_rest_read(value):
    """Issue 44, finding 4: one handler's malformed progress is said, not a traceback."""
    record = memory.record(None, digest="d", outcome="pending", reason="waiting", parked=True, depends_on=None)
    found = body({"kopf.zalando.org/delete_fn": value,
                  memory.MEMORY_ANNOTATION: json.dumps({"delete_fn": record, "other_fn": record})})
    got = report(KIND, found, now=NOW)
    states = {h["id"]: h["state"] for h in got["handlers"]}
    assert states == {"delete_fn": "unreadable", "other_fn": "pending"}
    [broken] = [h for h in got["handlers"] if h["id"] == "delete_fn"]
    assert broken["progress"]["unreadable"].startswith("the progress in annotations is malformed")
    assert "the progress in annotations is malformed" in render.why(got)


@pytest.mark.parametrize("stanza", [[1], "a string", {"delete_fn": "x"}, {"delete_fn": [1]}])
def test_malformed_progress_in_the_status_is_reported_and_stuck_goes_on(stanza):
    record = memory.record(None, digest="d", outcome="pending", reason="waiting", parked=True, depends_on=None)
    broken = body({memory.MEMORY_ANNOTATION: json.dumps({"delete_fn": record})}, status={"kopf": {"progress": stanza}})
    fine = body()
    got = report(KIND, broken, now=NOW)
    assert [h["state"] for h in got["handlers"]] == ["unreadable"]
    text = render.stuck([got, report(KIND, fine, now=NOW)])
    assert len(text.splitlines()) == 3 and "delete_fn: unreadable" in text


def test_stored_times_of_the_wrong_type_are_shown_as_they_are():
    found = body()
    found["status"] = {"kopf": {"progress": {"delete_fn": {"started": 5, "delayed": [1], "retries": 1}}}}
    text = render.why(report(KIND, found, now=NOW))
    assert "delete_fn" in text and "retrying" in text


def test_an_object_it_cannot_make_sense_of_is_one_row_that_says_why():
    strange = body()
    strange["metadata"]["deletionTimestamp"] = "not a time"
    got = report(KIND, strange, now=NOW)
    assert got["error"].startswith("ValueError: ") and got["handlers"] == []
    text = render.stuck([got, report(KIND, body(), now=NOW)])
    assert "could not be explained: ValueError" in text.splitlines()[1] and len(text.splitlines()) == 3
    assert "could not be explained: ValueError" in render.why(got)
