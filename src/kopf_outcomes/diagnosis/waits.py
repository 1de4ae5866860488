"""
The other objects a handler waits on (``depends_on_objects``), as ``why`` shows them: each source
with its tracked fields, each object the handler saw when it concluded (kept in its memory), and
which of them changed or went since, read now from the API server.

Objects that appeared since the conclusion are not in the memory: the operator sees them (they
wake the handler), ``why`` names only those remembered, and says so.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kopf_outcomes import paths
from kopf_outcomes.diagnosis.kube import Client, Discovery, KubeError
from kopf_outcomes.objects import fields_digest


def kubectl_name(resource: Sequence[str]) -> str:
    """Kopf's resource arguments as kubectl names the kind: ``("batch/v1", "jobs")`` →
    ``jobs.v1.batch``, ``("kopf.dev", "v1", "kopfexamples")`` → ``kopfexamples.v1.kopf.dev``."""
    parts = [str(part) for part in resource]
    if len(parts) == 3:
        group, version, plural = parts
        return f"{plural}.{version}.{group}" if group else f"{plural}.{version}" if version != "v1" else plural
    if len(parts) == 2:
        first, plural = parts
        group, slash, version = first.partition("/")
        if slash:
            return f"{plural}.{version}.{group}"
        return plural if first == "v1" else f"{plural}.{first}"
    return parts[0] if parts else ""


def waits(client: Client, seen: Sequence[Mapping[str, Any]],
          discovery: Discovery | None = None) -> list[dict[str, Any]]:
    """Each source of the memory's ``seen``, with each object's state now: unchanged, changed
    (its tracked fields' values differ), gone, or unknown (it could not be read: why)."""
    found = []
    discovery = discovery if discovery is not None else (client.discover() if seen else None)
    for source in seen:
        name = kubectl_name(source.get("resource") or [])
        fields = [str(path) for path in source.get("fields") or []]
        entry: dict[str, Any] = {"how": source.get("how"), "resource": name, "fields": fields, "objects": [],
                                 "more": source.get("more", 0)}
        try:
            kind = client.resolve(name, discovery)
        except KubeError as e:
            entry["error"] = e.reason
            found.append(entry)
            continue
        for item in source.get("objects") or []:
            namespace, obj_name = item.get("namespace"), item.get("name")
            state: dict[str, Any] = {"namespace": namespace, "name": obj_name}
            try:
                body = client.get(kind.path(namespace, obj_name))
            except KubeError as e:
                state.update(now="gone" if e.status == 404 else "unknown", error=None if e.status == 404 else e.reason)
                entry["objects"].append(state)
                continue
            if (body.get("metadata") or {}).get("uid") != item.get("uid"):
                state["now"] = "gone"  # another object of that name since
            else:
                values = [paths.resolve(body, path) for path in fields]
                state["values"] = dict(zip(fields, values, strict=True))
                state["now"] = "unchanged" if fields_digest(values) == item.get("fields") else "changed"
            entry["objects"].append(state)
        found.append(entry)
    return found


def lines(handler_id: str, sources: Sequence[Mapping[str, Any]]) -> list[str]:
    """The table's section: a line per source, a line per object."""
    out = [f"{handler_id} waits on other objects (as it saw them when it concluded; what changed since):"]
    for source in sources:
        tracked = f", fields {', '.join(source['fields'])}" if source["fields"] else ""
        out.append(f"  {source['how']} {source['resource']}{tracked}:")
        if source.get("error"):
            out.append(f"    could not be read: {source['error']}")
        if not source["objects"] and not source.get("error"):
            out.append("    none (objects that appeared since are not named here; they wake the handler)")
        for obj in source["objects"]:
            where = f"{obj['namespace']}/" if obj.get("namespace") else ""
            values = ", ".join(f"{path}={value!r}" for path, value in (obj.get("values") or {}).items())
            detail = f" ({obj['error']})" if obj.get("error") else f": {values}" if values else ""
            out.append(f"    {where}{obj['name']}  {obj['now']}{detail}")
        if source.get("more"):
            out.append(f"    ... and {source['more']} more (not named in the memory)")
    return out
