"""
What the plugin does with what the core tells it: Kopf-free, so it is tested without Kopf.
"""
from __future__ import annotations

import datetime
import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from kopf_outcomes import Fatal, HandlerRun, Kind, Outcome, Pending, ResourceRef, Retry, Success
from kopf_outcomes.finalizer import retains as retains_finalizer
from kopf_outcomes_prometheus.metrics import Metrics
from kopf_outcomes_prometheus.tracking import WaitClock, Waiting

SUB_HANDLER = Kind.SUBHANDLER.value
# The engine's fallback after a plugin failed names the plugin in its reason.
_PLUGIN_FAILURE = re.compile(r"""^plugin (['"])(?P<name>.*?)\1 failed: """)


class Observer:
    """Counts outcomes, tracks waiting handlers and wait times, in one registry."""

    def __init__(self, registry: CollectorRegistry, *, objects_reported: bool,
                 failures_reported: bool = False) -> None:
        # Without the core's per-cycle report of each object, the waiting gauge would be wrong
        # after a restart (parked objects are not re-run): it is then not exported at all.
        self.waiting = Waiting() if objects_reported else None
        self.clock = WaitClock()
        self.failures_reported = failures_reported
        self.metrics = Metrics(registry, waiting=self.waiting)

    def outcome(self, run: HandlerRun, outcome: Outcome, *, now: float | None = None) -> None:
        resource = str(run.resource) if run.resource is not None else ""
        name, level = labels_of(outcome)
        label = handler_label(run.handler_id, run.kind)
        self.metrics.outcomes.labels(resource, label, name, level).inc()
        if not self.failures_reported and isinstance(outcome, Retry):
            match = _PLUGIN_FAILURE.match(outcome.reason)
            if match and type(outcome).__name__ == "PluginFailure":
                self.plugin_failed(match.group("name"))
        uid = _uid(run.body)
        if uid is None:
            return  # activities: no object waits
        handler, cause = run.handler_id, run.reason or ""
        now = time.time() if now is None else now
        state: str | None = None
        if isinstance(outcome, Success):
            waited_for = self._waited(run, uid, cause, now)
            if waited_for is not None:
                self.metrics.wait.labels(resource, label, cause).observe(max(0.0, waited_for))
            self.clock.forget(uid, handler)
        elif isinstance(outcome, (Pending, Retry)):
            if run.kind != SUB_HANDLER:  # a wait begun before a restart began at the memory's since
                began = _since(run.previous) if waited(run.previous) else None
                self.clock.start(uid, handler, cause, now if began is None else min(began, now))
            state = "pending" if isinstance(outcome, Pending) else "retrying"
        elif isinstance(outcome, Fatal):
            self.clock.forget(uid, handler)
            state = "retained" if retains(run, outcome) else None
        if self.waiting is not None:
            self.waiting.set(uid, resource, handler, state, label)

    def _waited(self, run: HandlerRun, uid: str, cause: str, now: float) -> float | None:
        """How long the handler waited before this Success, if it did. A sub-handler's id may be
        built from data (one per item, a new one per change): a clock of ours would keep an entry
        for every id that stopped running. Its wait is Kopf's own runtime of it instead, the time
        since its first attempt, kept in the object's progress and gone with its parent's."""
        if run.kind == SUB_HANDLER:
            return run.runtime if run.retry > 0 else None  # earlier attempts that did not conclude: it waited
        started = self.clock.stop(uid, run.handler_id, cause)
        if started is None and waited(run.previous):
            started = _since(run.previous)  # waited before a restart: the memory knows since when
        return None if started is None else now - started

    def object(self, resource: ResourceRef | None, body: Mapping[str, Any], waiting: Mapping[str, str]) -> None:
        """The core's report of one object's waiting handlers, on every cycle (restarts included)."""
        uid = _uid(body)
        if uid is None or self.waiting is None:
            return
        self.waiting.replace(uid, str(resource) if resource is not None else "", waiting)

    def gone(self, body: Mapping[str, Any]) -> None:
        """The object has left the cluster: none of its handlers waits, and no wait of it ends."""
        uid = _uid(body)
        if uid is None:
            return
        self.clock.forget_object(uid)
        if self.waiting is not None:
            self.waiting.replace(uid, "", {})

    def plugin_failed(self, plugin: str) -> None:
        self.metrics.plugin_failures.labels(plugin).inc()


def handler_label(handler_id: str, kind: str) -> str:
    """The ``handler`` label: a handler's id, bounded by the operator's code. A sub-handler's id
    may be built from data (one per item, per object), so sub-handlers are counted together
    under the first segment of their id (their declared handler's) as ``<handler>/*``."""
    return f"{handler_id.split('/', 1)[0]}/*" if kind == SUB_HANDLER else handler_id


def waited(previous: Mapping[str, Any] | None) -> bool:
    """Whether the memory says the handler was waiting (its last conclusion a Pending or a Retry):
    only then is its ``since`` the start of a wait (with ``remember``, a success has one too)."""
    return previous is not None and previous.get("outcome") in ("pending", "retry")


def labels_of(outcome: Outcome) -> tuple[str, str]:
    """The ``outcome`` and ``level`` labels: level only where the outcome has one."""
    name = _base(outcome).__name__.lower()
    if isinstance(outcome, (Retry, Fatal)):
        return name, logging.getLevelName(outcome.level).lower()
    return name, ""


def _base(outcome: Outcome) -> type[Outcome]:
    for kind in (Success, Pending, Retry, Fatal):
        if isinstance(outcome, kind):
            return kind
    return type(outcome)


def retains(run: HandlerRun, outcome: Fatal) -> bool:
    """Whether a Fatal keeps the finalizer: the core's own rule (on deletion, retain chosen)."""
    return retains_finalizer(run.kind, run.reason, outcome.on_delete, run.options)


def _uid(body: Mapping[str, Any] | None) -> str | None:
    if body is None:
        return None
    uid = (body.get("metadata") or {}).get("uid")
    return str(uid) if uid else None


def _since(previous: Mapping[str, Any] | None) -> float | None:
    """The memory's ``since`` (UTC ISO time of the last change of conclusion), where it has one."""
    value = (previous or {}).get("since")
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()
