"""Counting one client's API requests from the audit log: each request once, by verb and kind."""
from __future__ import annotations

import json
from pathlib import Path

from benchmarks.audit_counts import count, per_object
from kopf_outcomes_testing.cluster.audit import AuditLog, Write


def line(audit_id: str, verb: str, user_agent: str, resource: str = "kopfexamples", subresource: str = "",
         stage: str = "ResponseComplete", uri: str = "/apis/kopf.dev/v1/namespaces/ns/kopfexamples",
         code: int = 200) -> str:
    ref = {"resource": resource, "namespace": "ns", "subresource": subresource} if resource else None
    return json.dumps({"auditID": audit_id, "stage": stage, "verb": verb, "userAgent": user_agent,
                       "user": {"username": "admin"}, "requestURI": uri, "objectRef": ref,
                       **({"responseStatus": {"code": code}} if stage == "ResponseComplete" else {})})


def test_counts_each_request_once_by_verb_and_kind_for_one_user_agent(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text("\n".join([
        line("w1", "watch", "kopf/1.45", stage="ResponseStarted"),
        line("l1", "list", "kopf/1.45"),
        line("p1", "patch", "kopf/1.45"),
        line("p2", "patch", "kopf/1.45", subresource="status"),
        line("p3", "patch", "kopf/1.45", code=422),  # a finalizer's JSON-patch whose resourceVersion test failed
        line("e1", "create", "kopf/1.45", resource="events"),
        line("d1", "get", "kopf/1.45", resource="", uri="/apis?timeout=32s"),
        line("w1", "watch", "kopf/1.45", stage="ResponseComplete"),  # the same watch, ended
        line("x1", "patch", "OpenAPI-Generator/31.1/python"),  # the benchmark's callback
        line("x2", "delete", "OpenAPI-Generator/31.1/python"),
    ]) + "\n")

    counts = count(AuditLog(log).writes(), user_agent="kopf/")

    assert counts["requests"] == 7
    assert counts["by_verb"] == {"create": 1, "get": 1, "list": 1, "patch": 3, "watch": 1}
    assert counts["writes"] == 4
    assert counts["refused"] == {"patch kopfexamples 422": 1}
    assert counts["events"] == 1
    assert counts["by_kind"]["patch kopfexamples/status"] == 1
    assert counts["by_kind"]["get /apis"] == 1
    assert per_object(counts, 4) == {"requests": 1.75, "writes": 1.0, "events": 0.25,
                                     "by_verb": {"create": 0.25, "get": 0.25, "list": 0.25, "patch": 0.75,
                                                 "watch": 0.25}}


def test_entries_without_an_audit_id_are_each_counted() -> None:
    entry = Write(verb="patch", resource="kopfexamples", subresource="", namespace="ns", name="a",
                  user_agent="kopf/1.45", uri="/apis/kopf.dev/v1/namespaces/ns/kopfexamples/a")
    assert count([entry, entry], user_agent="kopf/")["requests"] == 2
