"""
What ``stuck`` reads, and what it could not: the objects being deleted with finalizers held,
kind by kind, and every kind (or API group) it could not read, with the reason.

Unknown is not none: a kind that could not be listed (RBAC, a time-out, an API group whose
service is down) may hold stuck objects, so it is named, and "nothing is stuck" is said only
when every kind was read. Cluster-scoped kinds are listed cluster-wide whatever the namespace
(kubectl ignores ``-n`` for them). Lists are paged and of metadata only; the few objects being
deleted are then read whole.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from kopf_outcomes.diagnosis.kube import Client, Discovery, Kind, KubeError

Report = Callable[[Kind, Mapping[str, Any]], dict[str, Any]]


@dataclasses.dataclass
class Scan:
    """The reports of stuck objects, where they were looked for, and what could not be read."""

    namespace: str | None  # None: every namespace
    reports: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    read: int = 0  # kinds listed
    unread: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (kind or group, why)

    @property
    def complete(self) -> bool:
        return not self.unread


def scan(client: Client, kinds: list[Kind], namespace: str | None, report: Report,
         discovery: Discovery | None = None) -> Scan:
    """Look in ``namespace`` (None: all) for every kind; what fails is named, never skipped."""
    found = Scan(namespace)
    if discovery is not None:
        found.unread.extend((f"{group} (discovery)", why) for group, why in discovery.failures)
    for kind in kinds:
        where = namespace if kind.namespaced else None  # as kubectl: -n does not apply to cluster-scoped kinds
        try:
            deleting = [meta for meta in client.metadata(kind, where)
                        if meta.get("deletionTimestamp") and meta.get("finalizers")]
            for meta in deleting:
                body = _get(client, kind, meta)
                if body is not None:
                    found.reports.append(report(kind, body))
        except KubeError as e:
            found.unread.append((kind.qualified, e.reason))
            continue
        found.read += 1
    found.reports.sort(key=lambda r: (r["deletionTimestamp"], r["namespace"] or "", r["name"]))
    return found


def _get(client: Client, kind: Kind, meta: Mapping[str, Any]) -> dict[str, Any] | None:
    try:
        body = client.get(kind.path(meta.get("namespace"), meta.get("name")))
    except KubeError as e:
        if e.status == 404:
            return None  # gone since it was listed: not stuck
        raise
    return dict(body, kind=kind.kind)
