"""A control plane that audits every request (``audit="requests"``), for counting reads and watches
(the benchmark ``lifecycle``): a private one, so the shared cluster is never touched."""
from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.audit_counts import count
from kopf_outcomes_testing.cluster import ClusterInfo, control_plane
from kopf_outcomes_testing.cluster.audit import AuditLog

URLLIB = "Python-urllib/"  # the RestClient's user agent


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ClusterInfo]:
    monkeypatch.setenv("KOPF_OUTCOMES_STATE_DIR", str(tmp_path / "state"))
    try:
        yield control_plane.ensure_running(audit="requests", build=False)
    finally:
        control_plane.stop()


def test_reads_and_watches_are_logged_and_each_request_counted_once(cluster: ClusterInfo) -> None:
    log = AuditLog(cluster.audit_log)
    mark = log.mark()
    admin = cluster.admin_client()
    assert admin.request("GET", "/api/v1/namespaces/default")[0] == 200
    assert admin.request("GET", "/api/v1/namespaces")[0] == 200
    assert admin.request("GET", "/api/v1/namespaces?watch=true&timeoutSeconds=1")[0] == 200  # ends after 1 s
    assert admin.request("GET", "/api/v1/namespaces/absent")[0] == 404

    entries = [e for e in log.writes(since=mark) if e.user_agent.startswith(URLLIB)]
    stages = collections.Counter(e.verb for e in entries)
    assert stages["watch"] == 2  # when its response started, and when it ended: one auditID
    assert len({e.audit_id for e in entries if e.verb == "watch"}) == 1
    counts = count(entries, user_agent=URLLIB)
    assert counts["by_verb"] == {"get": 2, "list": 1, "watch": 1}
    assert counts["refused"] == {"get namespaces 404": 1}

    # The same folder again: the running cluster logs every request, so it serves as it is.
    assert control_plane.ensure_running(audit="requests", build=False).server == cluster.server
