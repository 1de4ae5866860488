"""stuck's reading on a fake API server: paging, metadata-only lists, what fails named (issue 34)."""
from __future__ import annotations

from typing import Any

import kopf
import pytest

from kopf_outcomes.diagnosis import render
from kopf_outcomes.diagnosis.kube import METADATA_ONLY, Client, Kind, KubeError
from kopf_outcomes.diagnosis.scan import scan

KEX = Kind("kopf.dev", "v1", "kopfexamples", "KopfExample", namespaced=True)
SECRETS = Kind("", "v1", "secrets", "Secret", namespaced=True)


def meta(name: str, deleting: bool) -> dict[str, Any]:
    found: dict[str, Any] = {"name": name, "namespace": "ns", "uid": name}
    if deleting:
        found.update(deletionTimestamp=f"2026-12-02T11:58:{len(name):02}Z", finalizers=["example.com/hold"])
    return found


class Fake(Client):
    """Pages of three; secrets time out; discovery of one group answers 503."""

    def __init__(self) -> None:
        super().__init__(kopf.ConnectionInfo(server="http://fake"))
        self.requests: list[tuple[str, dict[str, str], str | None]] = []
        self.objects = [meta(f"o{i}", deleting=i % 4 == 0) for i in range(8)]

    def get(self, path: str, accept: str | None = None, **query: str) -> dict[str, Any]:
        self.requests.append((path, query, accept))
        if path == "/api/v1":
            return {"resources": [{"name": "secrets", "kind": "Secret", "namespaced": True, "verbs": ["list"]}]}
        if path == "/apis":
            return {"groups": [{"name": "metrics.k8s.io", "preferredVersion": {"version": "v1beta1"}},
                               {"name": "kopf.dev", "preferredVersion": {"version": "v1"}}]}
        if path == "/apis/metrics.k8s.io/v1beta1":
            raise KubeError(f"GET {path}: 503 service unavailable", 503)
        if path in ("/apis/kopf.dev/v1", "/apis/kopf.dev/v1beta1"):
            return {"resources": [{"name": "kopfexamples", "kind": "KopfExample", "namespaced": True,
                                   "shortNames": ["kex"], "verbs": ["list"]}]}
        if path.startswith("/apis/kopf.dev/") and path.count("/") == 3:  # another version of the group
            raise KubeError(f"GET {path}: 404 the server could not find the requested resource", 404)
        if path.startswith("/api/v1/namespaces/ns/secrets"):
            raise KubeError(f"GET {path}: timed out")
        if path == "/apis/kopf.dev/v1/namespaces/ns/kopfexamples":
            start = int(query.get("continue") or 0)
            rest = start + int(query["limit"]) < len(self.objects)
            return {"items": [{"metadata": m} for m in self.objects[start:start + int(query["limit"])]],
                    "metadata": {"continue": str(start + int(query["limit"])) if rest else ""}}
        name = path.rsplit("/", 1)[1]
        return {"metadata": next(m for m in self.objects if m["name"] == name)}


def test_lists_are_paged_of_metadata_and_what_fails_is_named(monkeypatch):
    monkeypatch.setattr("kopf_outcomes.diagnosis.kube.PAGE", 3)
    fake = Fake()
    discovery = fake.discover()
    assert [k.plural for k in discovery.kinds] == ["secrets", "kopfexamples"]  # past the group that failed
    assert fake.resolve("kex", discovery) == KEX
    found = scan(fake, discovery.kinds, "ns", lambda kind, body: {"name": body["metadata"]["name"],
                                                                   "namespace": "ns", "deletionTimestamp": "x"},
                 discovery)
    assert [r["name"] for r in found.reports] == ["o0", "o4"]
    lists = [(query, accept) for path, query, accept in fake.requests if path.endswith("/kopfexamples")]
    assert [query for query, _ in lists] == [{"limit": "3"}, {"limit": "3", "continue": "3"},
                                             {"limit": "3", "continue": "6"}]
    assert all(accept == METADATA_ONLY for _, accept in lists)
    assert found.read == 1 and not found.complete
    assert found.unread == [("metrics.k8s.io/v1beta1 (discovery)", "503 service unavailable"),
                            ("secrets", "timed out")]


def test_nothing_is_said_to_be_stuck_only_when_every_kind_was_read():
    assert render.stuck([], where="in namespace 'ns'", read=2, narrowed=True) == \
        "No object is being deleted with finalizers held in namespace 'ns' (2 kinds read). Every namespace: add -A."
    partial = render.stuck([], where="in any namespace", read=1, unread=[("secrets", "timed out")])
    assert "No object is being deleted" not in partial
    assert partial.splitlines()[-2:] == ["Not read (1): objects there may be stuck too.", "  secrets: timed out"]


def test_what_could_not_be_read_is_one_line_per_reason_with_the_kinds_counted():
    """Issue 44, finding 3: under limited RBAC, "403 Forbidden: 58 kinds", not 58 lines."""
    forbidden = [(f"kind{i}", f'403 kind{i} is forbidden: User "u" cannot list resource "kind{i}"') for i in range(58)]
    note = render.unread_note([*forbidden, ("metrics.k8s.io/v1beta1 (discovery)", "503 service unavailable"),
                               ("secrets", "timed out"), ("configmaps", "timed out")])
    assert note.splitlines() == [
        "Not read (61): objects there may be stuck too.",
        "  403 Forbidden: 58 kinds (kind0, kind1, kind2, kind3, kind4 and 53 more)",
        "  metrics.k8s.io/v1beta1 (discovery): 503 service unavailable",
        "  timed out: 2 kinds (secrets, configmaps)",
    ]


def test_a_served_version_that_is_not_the_preferred_one_resolves_as_kubectl_accepts_it():
    """Issue 44, finding 5: kopfexamples.v1beta1.kopf.dev (served, v1 preferred)."""
    fake = Fake()
    discovery = fake.discover()
    assert fake.resolve("kopfexamples.v1beta1.kopf.dev", discovery) == \
        Kind("kopf.dev", "v1beta1", "kopfexamples", "KopfExample", namespaced=True)
    assert fake.resolve("kopfexamples.v1.kopf.dev", discovery) == KEX
    with pytest.raises(KubeError, match="no resource kind 'kopfexamples.v2.kopf.dev'"):
        fake.resolve("kopfexamples.v2.kopf.dev", discovery)
