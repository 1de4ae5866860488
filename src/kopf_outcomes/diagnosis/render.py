"""Reports as people read them (tables) and as scripts read them (JSON, YAML)."""
from __future__ import annotations

import datetime
import http
import json
from collections.abc import Mapping, Sequence
from typing import Any

import yaml  # PyYAML comes with Kopf

from kopf_outcomes.diagnosis import waits
from kopf_outcomes.diagnosis.kube import Kind
from kopf_outcomes.diagnosis.report import moment

PARKED_AFTER = 5 * 365 * 24 * 3600  # a Kopf delay this far out is a parked handler's, shown as such


def data(value: object, output: str) -> str:
    if output == "json":
        return json.dumps(value, indent=2)
    return str(yaml.safe_dump(value, sort_keys=False, allow_unicode=True)).rstrip("\n")


def duration(seconds: float | None) -> str:
    """As kubectl shows ages: 42s, 3m12s, 2h5m, 4d3h."""
    if seconds is None:
        return "-"
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes}m"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
             for row in [headers, *rows]]
    return "\n".join(lines)


def why(report: Mapping[str, Any]) -> str:
    where = f" in namespace {report['namespace']}" if report.get("namespace") else ""
    lines = [f"{report['resource']}/{report['name']}{where}"]
    if report.get("serving"):
        lines.append(f"  serving: {report['serving']['message']}")
    if report.get("error"):
        lines.append(f"  could not be explained: {report['error']}")
    if report.get("deletionTimestamp"):
        lines.append(f"  deleting since {report['deletionTimestamp']} ({duration(report['waitingSeconds'])})")
    finalizers = report.get("finalizers") or []
    if not finalizers:
        lines.append("  finalizers: none")
    for finalizer in finalizers:
        note = ""
        if finalizer["retainedBy"]:
            note = f" — retained on purpose by {', '.join(finalizer['retainedBy'])}"
        elif finalizer["operator"]:
            note = " — the operator's"
        lines.append(f"  finalizer: {finalizer['name']}{note}")
    handlers = report.get("handlers") or []
    if not handlers:
        lines.append("  no handler has progress or memory on this object")
        return "\n".join(lines)
    rows = []
    for handler in handlers:
        record, kp = handler.get("memory") or {}, handler.get("progress") or {}
        reason = kp.get("unreadable") or record.get("reason") or kp.get("message") or ""
        rows.append([handler["id"], handler["state"], str(reason),
                     short(record.get("since")), str(kp.get("retries", "-")), short(kp.get("started")),
                     _overdue(handler) or _next_run(kp.get("delayed"), handler["state"], record.get("depends_on"),
                                                    handler.get("nextRecheck"), handler.get("escalatesAt"))])
    lines += ["", table(["HANDLER", "STATE", "REASON", "SINCE", "RETRIES", "STARTED", "NEXT RUN"], rows)]
    for handler in handlers:
        if handler.get("waitsOn"):
            lines += ["", *waits.lines(handler["id"], handler["waitsOn"])]
    for handler in handlers:
        woken = (handler.get("memory") or {}).get("woken_by")
        if woken:
            lines += ["", f"{handler['id']} was woken by a change of (its latest runs, the last first):",
                      *(f"  {', '.join(paths)}" for paths in reversed(woken))]
    for handler in handlers:
        if handler.get("release"):
            lines += ["", f"{handler['id']} retains the finalizer on purpose. Once the cause is fixed, release it:",
                      f"  {handler['release']}"]
    return "\n".join(lines)


def where(namespace: str | None, kinds: Sequence[Kind]) -> str:
    """Where ``stuck`` looked, as a phrase: ``in namespace 'x' (cluster-scoped kinds: cluster-wide)``."""
    if namespace is None:
        return "in any namespace"
    if not any(kind.namespaced for kind in kinds):
        return "cluster-wide (a cluster-scoped kind)"
    both = any(not kind.namespaced for kind in kinds)
    return f"in namespace {namespace!r}" + (" (cluster-scoped kinds: cluster-wide)" if both else "")


def unread_note(failures: Sequence[tuple[str, str]]) -> str:
    """One line per reason, the kinds counted and the first few named: a user with limited
    RBAC sees "403 Forbidden: 58 kinds", not 58 lines; an odd one out keeps its own line."""
    groups: dict[str, list[str]] = {}
    for what, why in failures:
        groups.setdefault(reason_class(why), []).append(what)
    lines = [f"Not read ({len(failures)}): objects there may be stuck too."]
    for reason, kinds in groups.items():
        if len(kinds) == 1:
            lines.append(f"  {kinds[0]}: {next(why for what, why in failures if what == kinds[0])}")
            continue
        shown = ", ".join(kinds[:SHOWN_KINDS]) + (f" and {len(kinds) - SHOWN_KINDS} more" if len(kinds) > SHOWN_KINDS
                                                  else "")
        lines.append(f"  {reason}: {len(kinds)} kinds ({shown})")
    return "\n".join(lines)


SHOWN_KINDS = 5


def reason_class(why: str) -> str:
    """What several kinds failed alike for: the HTTP status (``403 Forbidden``), whose message
    names each kind, or the text itself (``timed out``)."""
    code, _, _ = why.partition(" ")
    if code.isdigit() and len(code) == 3:
        try:
            return f"{code} {http.HTTPStatus(int(code)).phrase}"
        except ValueError:
            return code
    return why


def stuck(reports: Sequence[Mapping[str, Any]], *, where: str = "", unread: Sequence[tuple[str, str]] = (),
          read: int | None = None, narrowed: bool = False) -> str:
    """The table of stuck objects; "nothing is stuck" only when every kind was read, and every
    kind (or API group) not read named with the reason. ``narrowed``: one namespace was read."""
    if not reports:
        place = f" {where}" if where else ""
        kinds = f" ({read} kind{'' if read == 1 else 's'} read)" if read is not None else ""
        hint = " Every namespace: add -A." if narrowed else ""
        if not unread:
            return f"No object is being deleted with finalizers held{place}{kinds}.{hint}"
        return (f"No object found being deleted with finalizers held{place} among the kinds read{kinds}, "
                f"but not every kind could be read.{hint}\n{unread_note(unread)}")
    rows = []
    for report in reports:
        waiting = [f"{h['id']}: {h['state']}" for h in report["handlers"] if h["state"] != "succeeded"]
        rows.append([report.get("namespace") or "-", f"{report['resource']}/{report['name']}",
                     duration(report.get("waitingSeconds")),
                     ",".join(f["name"] for f in report["finalizers"]),
                     "; ".join(waiting) or _unexplained(report)])
    found = table(["NAMESPACE", "OBJECT", "DELETING FOR", "FINALIZERS", "HANDLERS"], rows)
    return found if not unread else f"{found}\n\n{unread_note(unread)}"


def not_found(kind: Kind, name: str, namespace: str | None) -> str:
    """``why`` of an object that is not there: one line, where it looked, where else to look."""
    if namespace is None:
        return f"{kind.qualified} {name!r} not found (a cluster-scoped kind: no namespace to choose)."
    return (f"{kind.qualified} {name!r} not found in namespace {namespace!r}. Another namespace: -n NAMESPACE; "
            f"every namespace: kubectl get {kind.qualified} -A --field-selector metadata.name={name}")


def _unexplained(report: Mapping[str, Any]) -> str:
    if report.get("error"):
        return f"could not be explained: {report['error']}"
    if any(f["operator"] for f in report["finalizers"]):
        return "no progress of the operator's handlers yet: is the operator running?"
    return "held by other finalizers than this operator's"


def short(stamp: object) -> str:
    """Kopf's times to the second, in UTC, as Kubernetes shows its own: 2026-12-02T20:42:55Z."""
    found = moment(stamp)
    return found.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if found else str(stamp or "-")


def _overdue(handler: Mapping[str, Any]) -> str | None:
    if not handler.get("overdue"):
        return None
    since = handler.get("overdueSince")
    return f"OVERDUE since {short(since)}" if since else "OVERDUE (nothing serves it)"


def _next_run(delayed: str | None, state: str, depends_on: Sequence[str] | None,
              next_recheck: str | None = None, escalates_at: str | None = None) -> str:
    """When it runs again: a recheck's next grid point (from the memory), Kopf's timer, or for a
    parked handler what wakes it (the memory's scope); and the deadline of its escalation."""
    if escalates_at is not None:
        sooner = _next_run(delayed, state, depends_on, next_recheck)
        return f"{sooner}; escalates at {short(escalates_at)}"
    if next_recheck is not None:
        return short(next_recheck)
    due = moment(delayed)
    now = datetime.datetime.now(datetime.timezone.utc)
    if state in ("pending", "retained") and due is not None and (due - now).total_seconds() > PARKED_AFTER:
        if state == "retained":
            return "when released"
        return f"on a change of {', '.join(depends_on)}" if depends_on else "on any change"
    return short(delayed)
