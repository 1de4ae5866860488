"""Counting writes from the API server's audit log, also across its rotation (it renames a full
log to ``audit-<time>.log`` and starts a new one): a rotation must never read as "no writes"."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kopf_outcomes_testing.cluster import ClusterError, control_plane
from kopf_outcomes_testing.cluster.audit import AuditLog, AuditLogRotatedError


def _log(path: Path, *names: str) -> None:
    with path.open("a") as file:
        for name in names:
            event = {"verb": "patch", "userAgent": "kopf/1.45", "objectRef": {"resource": "kopfexamples",
                                                                            "namespace": "ns", "name": name}}
            file.write(json.dumps(event) + "\n")


def _names(log: AuditLog, **kwargs: object) -> list[str]:
    return [write.name for write in log.writes(user_agent="kopf", **kwargs)]  # type: ignore[arg-type]


def test_writes_after_the_mark_only(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    _log(log.path, "before")
    mark = log.mark()
    _log(log.path, "after-1", "after-2")
    assert _names(log, since=mark) == ["after-1", "after-2"]
    assert _names(log) == ["before", "after-1", "after-2"]


def test_writes_across_rotations(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    _log(log.path, "before")
    mark = log.mark()
    _log(log.path, "in-the-first")
    log.path.rename(tmp_path / "audit-2026-12-03T04-02-42.176.log")
    _log(log.path, "in-the-second")
    log.path.rename(tmp_path / "audit-2026-12-03T04-10-00.000.log")
    _log(log.path, "in-the-current")
    assert _names(log, since=mark) == ["in-the-first", "in-the-second", "in-the-current"]


def test_a_mark_before_the_log_existed_reads_everything(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    mark = log.mark()
    _log(log.path, "first")
    log.path.rename(tmp_path / "audit-2026-12-03T04-02-42.176.log")
    _log(log.path, "second")
    assert _names(log, since=mark) == ["first", "second"]


def test_a_rotated_part_that_is_gone_raises_instead_of_reading_no_writes(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    _log(log.path, "before")
    mark = log.mark()
    log.path.rename(tmp_path / "audit-2026-12-03T04-02-42.176.log")
    (tmp_path / "audit-2026-12-03T04-02-42.176.log").unlink()
    _log(log.path, "after")
    with pytest.raises(AuditLogRotatedError, match="rotated since the mark"):
        log.writes(since=mark)


def test_a_mark_on_an_empty_log_reads_what_follows(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    log.path.touch()
    mark = log.mark()
    _log(log.path, "first", "second")
    assert _names(log, since=mark) == ["first", "second"]


def test_a_running_cluster_that_audits_writes_only_is_refused_for_every_request(tmp_path: Path) -> None:
    """It keeps the policy it started with: counting reads on it would read as 0 reads."""
    control_plane._audit_policy(tmp_path, "writes")
    control_plane._check_audit(tmp_path, "writes")
    with pytest.raises(ClusterError, match="does not log every request"):
        control_plane._check_audit(tmp_path, "requests")
    control_plane._audit_policy(tmp_path, "requests")
    control_plane._check_audit(tmp_path, "requests")
    assert "verbs" not in (tmp_path / "audit-policy.yaml").read_text()  # every verb, reads and watches too
