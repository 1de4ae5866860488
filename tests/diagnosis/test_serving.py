"""Is anything serving the object? Kopf's peering records and their declared selections (issue 44, finding 1)."""
from __future__ import annotations

import datetime
import json

import kopf
import pytest

from kopf_outcomes import memory
from kopf_outcomes._kopf import requeue
from kopf_outcomes.diagnosis import render
from kopf_outcomes.diagnosis.report import report
from kopf_outcomes.diagnosis.serving import CLUSTER_PEERINGS, SELECTOR_ANNOTATION, matches, peering, verdict
from tests.diagnosis.test_report import KIND, NOW, body, kopf_progress

SHARD = "kopf-outcomes.example.com/shard"


def a_peering(name: str, selector: str | None, *peers: tuple[str, datetime.datetime]) -> dict:
    annotations = {SELECTOR_ANNOTATION: selector} if selector is not None else {}
    item = {"metadata": {"name": name, "annotations": annotations},
            "status": {identity: {"priority": 0, "lifetime": 60, "lastseen": seen.isoformat()}
                       for identity, seen in peers}}
    return peering(item, CLUSTER_PEERINGS, NOW)


RECENT, LONG_AGO = NOW - datetime.timedelta(seconds=10), NOW - datetime.timedelta(minutes=5)


@pytest.mark.parametrize("selector, labels, expected", [
    ("", {}, True),
    (f"{SHARD}=a", {SHARD: "a"}, True),
    (f"{SHARD}==a", {SHARD: "b"}, False),
    (f"{SHARD}!=a", {}, True),
    (f"{SHARD}", {SHARD: "x"}, True),
    (f"!{SHARD}", {SHARD: "x"}, False),
    (f"{SHARD} in (a, b),tier notin (gold)", {SHARD: "b", "tier": "silver"}, True),
    (f"{SHARD} in (a,b)", {SHARD: "c"}, False),
    ("a=1,b=2", {"a": "1", "b": "3"}, False),
])
def test_label_selectors_as_kubernetes_reads_them(selector, labels, expected):
    assert matches(selector, labels) is expected


def test_a_selector_that_is_not_one_is_named():
    with pytest.raises(ValueError, match="is not a label selector"):
        matches("a=b c", {})


def test_served_by_a_live_operator_of_the_peering_that_covers_it():
    found = verdict([a_peering("shard-a", f"{SHARD}=a", ("host@1", RECENT)),
                     a_peering("shard-b", f"{SHARD}=b", ("host@2", RECENT))], {SHARD: "a"})
    assert found["status"] == "served"
    assert found["message"].startswith("served by peering shard-a: host@1 (priority 0")


def test_a_shard_nobody_serves_is_said_plainly():
    found = verdict([a_peering("shard-a", f"{SHARD}=a", ("host@1", RECENT))], {SHARD: "c"})
    assert found["status"] == "not-served"
    assert found["message"] == "NOT SERVED: no peering's selection covers this object's labels"


def test_a_stopped_operator_is_not_serving():
    for peers in ((), (("host@1", LONG_AGO),)):  # a clean exit removes it; a killed one expires
        found = verdict([a_peering("shard-a", f"{SHARD}=a", *peers)], {SHARD: "a"})
        assert (found["status"], found["message"]) == \
            ("not-served", "NOT SERVED: no operator of peering shard-a (which covers it) is running")


def test_where_it_cannot_tell_it_says_so():
    assert verdict([], {})["status"] == "unknown"
    assert "no Kopf peering object here" in verdict([], {})["message"]
    found = verdict([a_peering("default", None, ("host@1", RECENT))], {})
    assert found["status"] == "unknown" and "no peering declares which objects it serves" in found["message"]
    found = verdict([a_peering("default", None, ("host@1", RECENT)), a_peering("shard-a", f"{SHARD}=a")], {})
    assert found["status"] == "not-served" and "(default) are not counted" in found["message"]


def test_a_recheck_while_nothing_serves_is_overdue_not_moved_forward(monkeypatch):
    monkeypatch.setattr(requeue, "SPREAD", 0.0)  # the grid without its phase (tests/unit/test_requeue.py)
    record = memory.record(None, digest="d", outcome="pending", reason="waiting", parked=False, depends_on=None,
                           recheck=60.0)
    record["since"] = "2026-12-02T11:50:00+00:00"
    found = body({memory.MEMORY_ANNOTATION: json.dumps({"delete_fn": record})})
    stopped = {"status": "not-served", "message": "NOT SERVED: ...", "peerings": [],
               "lastSeen": "2026-12-02T11:55:30+00:00"}
    got = report(KIND, found, now=NOW, served=stopped)
    [handler] = got["handlers"]
    assert (handler["overdue"], handler["overdueSince"], handler["nextRecheck"]) == \
        (True, "2026-12-02T11:56:00+00:00", None)
    later = report(KIND, found, now=NOW + datetime.timedelta(minutes=3), served=stopped)
    assert later["handlers"][0]["overdueSince"] == handler["overdueSince"]  # not moved forward
    text = render.why(got)
    assert "serving: NOT SERVED" in text.splitlines()[1] and "OVERDUE since 2026-12-02T11:56:00Z" in text
    unseen = report(KIND, found, now=NOW, served={**stopped, "lastSeen": None})
    assert "OVERDUE (nothing serves it)" in render.why(unseen)
    served = report(KIND, found, now=NOW, served={"status": "served", "message": "served by ...", "peerings": []})
    assert served["handlers"][0]["overdue"] is False and served["handlers"][0]["nextRecheck"]


def test_a_retry_whose_time_has_passed_is_overdue():
    found = body()
    kopf_progress(kopf.AnnotationsProgressStorage(), "delete_fn",
                  {"started": "2026-12-02T11:58:30", "delayed": "2026-12-02T11:59:00", "retries": 1,
                   "success": False, "failure": False, "message": "busy"}, found)
    [handler] = report(KIND, found, now=NOW)["handlers"]
    assert handler["overdue"] and handler["overdueSince"].startswith("2026-12-02T11:59:00")
