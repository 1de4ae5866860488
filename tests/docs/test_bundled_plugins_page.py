"""docs/reference/bundled-plugins.md lists the Prometheus plugin's metrics as the plugin registers them."""
from __future__ import annotations

import re

from kopf_outcomes_prometheus.metrics import Metrics, WaitingCollector
from kopf_outcomes_prometheus.tracking import Waiting
from prometheus_client import CollectorRegistry

from tests.docs.blocks import ROOT

PAGE = ROOT / "docs" / "reference" / "bundled-plugins.md"


def documented() -> dict[str, tuple[str, set[str]]]:
    rows = re.findall(r"^\| `(kopf_outcomes_\w+)` \| (\w+) \| ([^|]+) \|", PAGE.read_text(), flags=re.MULTILINE)
    return {name: (kind, set(re.findall(r"`(\w+)`", labels))) for name, kind, labels in rows}


def registered() -> dict[str, tuple[str, set[str]]]:
    """Each family's type and label names (prometheus-client's ``_labelnames``: families without
    samples yet do not show their labels otherwise)."""
    metrics = Metrics(CollectorRegistry(), waiting=None)
    found = {}
    for metric in (metrics.outcomes, metrics.wait, metrics.plugin_failures):
        (family,) = metric.describe()
        name = family.name + ("_total" if family.type == "counter" else "")
        found[name] = (family.type, set(metric._labelnames))
    waiting = WaitingCollector(Waiting())._family()
    found[waiting.name] = (waiting.type, set(waiting._labelnames))  # type: ignore[attr-defined]
    return found


def test_the_metrics_table_matches_the_plugin() -> None:
    pages, code = documented(), registered()
    assert set(pages) == set(code), (sorted(pages), sorted(code))
    for name, (kind, labels) in pages.items():
        assert (kind, labels) == code[name], f"{name}: documented {kind} {sorted(labels)}, registered {code[name]}"
