"""
API requests of one client, counted from the audit log of a cluster that logs every request
(``ensure_running(audit="requests")``): by verb and by kind, with the writes and the Events
among them. Kopf's client is told apart by its user agent (``kopf/<version>``); the
benchmark's own calls (creations, callbacks, its watch) have another one.

A request may have several entries (a watch: when its response starts, and when it ends): it
is counted once, by its auditID.
"""
from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

from kopf_outcomes_testing.cluster.audit import Write

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def kind(entry: Write) -> str:
    """``verb resource[/subresource]``, or ``verb /path`` for a non-resource request (discovery)."""
    if entry.resource:
        return f"{entry.verb} {entry.resource}" + (f"/{entry.subresource}" if entry.subresource else "")
    return f"{entry.verb} {entry.uri.split('?', 1)[0]}"


def count(entries: Iterable[Write], *, user_agent: str) -> dict[str, Any]:
    """The requests whose user agent starts with ``user_agent``, each counted once."""
    seen: set[str] = set()
    by_kind: collections.Counter[str] = collections.Counter()
    refused: collections.Counter[str] = collections.Counter()  # answered 4xx/5xx: a conflict, a 404, ...
    for entry in entries:
        if not entry.user_agent.startswith(user_agent):
            continue
        if entry.audit_id:
            if entry.audit_id in seen:
                continue
            seen.add(entry.audit_id)
        by_kind[kind(entry)] += 1
        if entry.code >= 400:
            refused[f"{kind(entry)} {entry.code}"] += 1
    by_verb: collections.Counter[str] = collections.Counter()
    for name, n in by_kind.items():
        by_verb[name.split(" ", 1)[0]] += n
    return {
        "requests": sum(by_kind.values()),
        "writes": sum(n for verb, n in by_verb.items() if verb in WRITE_VERBS),
        "events": sum(n for name, n in by_kind.items()
                      if name.split(" ", 1)[0] in WRITE_VERBS and name.split(" ", 1)[1] == "events"),
        "by_verb": dict(sorted(by_verb.items())),
        "by_kind": dict(sorted(by_kind.items())),
        "refused": dict(sorted(refused.items())),
    }


def per_object(counts: dict[str, Any], objects: int) -> dict[str, Any]:
    """The same figures divided by the number of objects (rounded to 2 decimals)."""
    def each(n: float) -> float:
        return round(n / objects, 2)
    return {"requests": each(counts["requests"]), "writes": each(counts["writes"]),
            "events": each(counts["events"]),
            "by_verb": {verb: each(n) for verb, n in counts["by_verb"].items()}}
