"""
Is anything serving this object? Read from Kopf's peering records, where the operators use them.

Kopf's peering objects (``ClusterKopfPeering``, ``KopfPeering`` in the object's namespace) hold each
running operator's identity, priority and when it was last seen (Kopf renews it every minute or
so and removes it at a clean exit). What a peering's operators serve is declared on the peering
object by the annotation ``outcomes.kopf.zalando.org/selector``: a label selector of the objects
(``kopf-outcomes.example.com/shard=a``; empty: every object in its scope). A peering without it
declares nothing, and is named as such, never counted for or against an object.

Three answers: **served** (a live operator of a peering whose selection covers the object),
**not served** (peerings declare what they serve, and none with a live operator covers it), and
**unknown** (no peering in use, or none declares its selection, or they could not be read):
an operator run with ``--standalone`` cannot be seen from the cluster.
"""
from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any

from kopf_outcomes.diagnosis.kube import Client, Kind, KubeError

SELECTOR_ANNOTATION = "outcomes.kopf.zalando.org/selector"
CLUSTER_PEERINGS = Kind("kopf.dev", "v1", "clusterkopfpeerings", "ClusterKopfPeering", namespaced=False)
PEERINGS = Kind("kopf.dev", "v1", "kopfpeerings", "KopfPeering", namespaced=True)


def serving(client: Client, body: Mapping[str, Any], now: datetime.datetime) -> dict[str, Any]:
    """The answer, with every peering read: what ``why`` shows first."""
    metadata = body.get("metadata") or {}
    found: list[dict[str, Any]] = []
    try:
        for kind, namespace in ((CLUSTER_PEERINGS, None), (PEERINGS, metadata.get("namespace"))):
            if kind.namespaced and not namespace:
                continue
            found.extend(peering(item, kind, now) for item in _list(client, kind, namespace))
    except KubeError as e:
        return {"status": "unknown", "message": f"Kopf's peering objects could not be read: {e.reason}",
                "peerings": found}
    return verdict(found, metadata.get("labels") or {})


def peering(item: Mapping[str, Any], kind: Kind, now: datetime.datetime) -> dict[str, Any]:
    """One peering object: its declared selection and its operators, each alive or not."""
    metadata = item.get("metadata") or {}
    selector = (metadata.get("annotations") or {}).get(SELECTOR_ANNOTATION)
    peers = []
    for identity, peer in (item.get("status") or {}).items():
        if isinstance(peer, Mapping):
            deadline = _deadline(peer)
            peers.append({"id": identity, "priority": peer.get("priority", 0), "lastSeen": peer.get("lastseen"),
                          "alive": deadline is not None and deadline > now})
    return {"kind": kind.kind, "name": metadata.get("name"), "namespace": metadata.get("namespace"),
            "selector": selector, "peers": sorted(peers, key=lambda p: -_int(p["priority"]))}


def verdict(peerings: list[dict[str, Any]], labels: Mapping[str, str]) -> dict[str, Any]:
    if not peerings:
        return {"status": "unknown", "peerings": [], "message": (
            "no Kopf peering object here: whether an operator serves this object cannot be told "
            "(operators run with --standalone are not seen from the cluster)")}
    declared = [p for p in peerings if p["selector"] is not None]
    silent = ", ".join(p["name"] for p in peerings if p["selector"] is None)
    caveat = (f"; peerings that declare no selection ({silent}) are not counted: annotate them with "
              f"{SELECTOR_ANNOTATION}") if silent else ""
    for p in declared:
        try:
            p["covers"] = matches(p["selector"], labels)
        except ValueError as e:
            p["covers"], p["error"] = None, str(e)
    covering = [p for p in declared if p["covers"]]
    alive = [p for p in covering if any(peer["alive"] for peer in p["peers"])]
    if alive:
        served = "; ".join(f"peering {p['name']}: {_active(p)}" for p in alive)
        twice = " (more than one peering: two operators may run its handlers)" if len(alive) > 1 else ""
        return {"status": "served", "peerings": peerings, "message": f"served by {served}{twice}"}
    if not declared:
        return {"status": "unknown", "peerings": peerings, "message": (
            f"no peering declares which objects it serves ({SELECTOR_ANNOTATION}): whether an operator "
            f"serves this object cannot be told")}
    if covering:
        names = ", ".join(p["name"] for p in covering)
        seen = [peer["lastSeen"] for p in covering for peer in p["peers"] if isinstance(peer["lastSeen"], str)]
        return {"status": "not-served", "peerings": peerings, "lastSeen": max(seen, default=None), "message": (
            f"NOT SERVED: no operator of peering {names} (which covers it) is running{caveat}")}
    return {"status": "not-served", "peerings": peerings, "message": (
        f"NOT SERVED: no peering's selection covers this object's labels{caveat}")}


def _active(p: Mapping[str, Any]) -> str:
    """The operator that runs the handlers: Kopf pauses every other one for the highest priority."""
    live = [peer for peer in p["peers"] if peer["alive"]]
    seen = _seen(live[0]["lastSeen"])
    shown = seen.strftime("%Y-%m-%dT%H:%M:%SZ") if seen is not None else live[0]["lastSeen"]
    return f"{live[0]['id']} (priority {live[0]['priority']}, last seen {shown})"


_REQUIREMENT = re.compile(r"\s*(!?)\s*([^\s=!,()]+)(?:\s*(==|=|!=)\s*([^\s,()]*)|\s+(in|notin)\s*\(([^)]*)\))?\s*")


def matches(selector: str, labels: Mapping[str, str]) -> bool:
    """A Kubernetes label selector (``a=b,c!=d,e,!f,g in (h,i),j notin (k)``) against labels;
    ValueError naming what is not one."""
    position = 0
    result = True
    text = selector.strip()
    while position < len(text):
        found = _REQUIREMENT.match(text, position)
        if found is None or found.end() == position:
            raise ValueError(f"{SELECTOR_ANNOTATION}: {selector!r} is not a label selector (at {position})")
        negated, key, operator, value, set_operator, values = found.groups()
        if negated:
            result = result and operator is None and set_operator is None and key not in labels
        elif operator is not None:
            result = result and ((labels.get(key) == value) if operator != "!=" else labels.get(key) != value)
        elif set_operator is not None:
            choices = {v.strip() for v in values.split(",")}
            chosen = labels.get(key) in choices
            result = result and (chosen if set_operator == "in" else not chosen)
        else:
            result = result and key in labels
        position = found.end()
        if position < len(text):
            if text[position] != ",":
                raise ValueError(f"{SELECTOR_ANNOTATION}: {selector!r} is not a label selector (at {position})")
            position += 1
    return result


def _list(client: Client, kind: Kind, namespace: str | None) -> list[dict[str, Any]]:
    try:
        items = client.get(kind.path(namespace)).get("items") or []
    except KubeError as e:
        if e.status == 404:
            return []  # Kopf's peering CRDs are not installed: no peering of this kind
        raise
    return [dict(item) for item in items if isinstance(item, Mapping)]


def _deadline(peer: Mapping[str, Any]) -> datetime.datetime | None:
    """When Kopf considers the peer gone: last seen plus its lifetime (as Kopf's own ``Peer``)."""
    seen = _seen(peer.get("lastseen"))
    try:
        lifetime = float(peer.get("lifetime", 60))
    except (ValueError, TypeError):
        return None
    return seen + datetime.timedelta(seconds=lifetime) if seen is not None else None


def _seen(stamp: object) -> datetime.datetime | None:
    try:
        seen = datetime.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return None
    return seen.astimezone(datetime.timezone.utc) if seen.tzinfo else seen.replace(tzinfo=datetime.timezone.utc)


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0
