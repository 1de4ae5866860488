"""
The metric families, by Prometheus conventions (``promtool check metrics`` is clean on them).

Labels are bounded: resource kinds, handler ids, outcome names, log levels, causes, plugin
names. Never object names or namespaces: an operator may serve a million objects.
"""
from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kopf_outcomes_prometheus.tracking import Waiting

PREFIX = "kopf_outcomes"

# From a quick callback to a day-long external process.
WAIT_BUCKETS = (0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600)


class Metrics:
    """All metric families of the plugin, registered in one registry."""

    def __init__(self, registry: CollectorRegistry, *, waiting: Waiting | None) -> None:
        self.registry = registry
        self.outcomes = Counter(
            f"{PREFIX}_handler_outcomes", "Handler runs by their final outcome (success, pending, retry, fatal); "
            "level is the log level of retry and fatal outcomes.",
            ["resource", "handler", "outcome", "level"], registry=registry)
        self.wait = Histogram(
            f"{PREFIX}_handler_wait_seconds", "Time from a handler's first pending or retry outcome to its "
            "success, by the cause it handled (create, update, delete, resume).",
            ["resource", "handler", "cause"], buckets=WAIT_BUCKETS, registry=registry)
        self.plugin_failures = Counter(
            f"{PREFIX}_plugin_failures", "Failures of kopf-outcomes plugins, contained by the operator, by plugin.",
            ["plugin"], registry=registry)
        if waiting is not None:
            registry.register(WaitingCollector(waiting))


class WaitingCollector(Collector):
    """``kopf_outcomes_handlers_waiting``: counted from :class:`Waiting` at scrape time."""

    NAME = f"{PREFIX}_handlers_waiting"
    HELP = ("Handlers waiting now, by state: pending (on a change or a recheck), retrying, "
            "or retained (a finalizer kept after a fatal failure until a person releases it).")

    def __init__(self, waiting: Waiting) -> None:
        self.waiting = waiting

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(self.NAME, self.HELP, labels=["resource", "handler", "state"])

    def describe(self) -> Iterator[Metric]:
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for labels, count in sorted(self.waiting.counts().items()):
            family.add_metric(list(labels), count)
        yield family
