"""
Shared parts of the chaos scenarios: objects, callbacks that check the finalizer is still there,
and the figures each scenario reports (the external system and the operator supervisor have
modules of their own).

Early release: an object (or one operator's finalizer on it) gone before its callback was sent.
The callback is a PATCH of the status subresource; its answer shows the object as it is at that
moment, so a 404 or a missing finalizer in it proves the release came first.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from tests.chaos.external import ExternalSystem
from tests.chaos.supervisor import Operators

MERGE_PATCH = "application/merge-patch+json"
DEFAULT_FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
STUCK_AFTER = 60.0  # seconds after the last callback, with the operator up
QUICK = os.environ.get("KOPF_OUTCOMES_CHAOS", "full") == "quick"
ROOT = Path(__file__).resolve().parents[2]
REPORT_DIR = Path(os.environ.get("KOPF_OUTCOMES_CHAOS_DIR") or ROOT / ".chaos")


def seed() -> int:
    """The run's seed: $KOPF_OUTCOMES_CHAOS_SEED, or a fresh one; printed (shown with a failure)."""
    value = int(os.environ.get("KOPF_OUTCOMES_CHAOS_SEED") or random.SystemRandom().randrange(1 << 31))
    print(f"chaos seed: {value} (KOPF_OUTCOMES_CHAOS_SEED={value} repeats the run)")
    return value


async def create(objects: client.CustomObjectsApi, namespace: str, names: Iterable[str],
                 labels: dict[str, str] | None = None) -> None:
    for name in names:
        body = {"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                "metadata": {"name": name, "labels": labels or {}}, "spec": {}}
        await objects.create_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", body)


async def delete(objects: client.CustomObjectsApi, namespace: str, names: Iterable[str]) -> None:
    for name in names:
        await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", name)


async def present(objects: client.CustomObjectsApi, namespace: str) -> dict[str, list[str]]:
    """name -> finalizers, of every object in the namespace."""
    listed = await objects.list_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples")
    return {item["metadata"]["name"]: list(item["metadata"].get("finalizers") or []) for item in listed["items"]}


async def wait_until(check: Callable[[], Any], *, timeout: float, interval: float = 0.2) -> bool:
    """Poll a sync or async check; True if it held within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(interval)


async def unfinalized(objects: client.CustomObjectsApi, namespace: str, names: Iterable[str],
                      finalizer: str = DEFAULT_FINALIZER) -> list[str]:
    found = await present(objects, namespace)
    return [name for name in names if finalizer not in found.get(name, [])]


async def wait_finalized(objects: client.CustomObjectsApi, namespace: str, names: Iterable[str],
                         finalizer: str = DEFAULT_FINALIZER, timeout: float = 30) -> bool:
    wanted = set(names)

    async def ready() -> bool:
        found = await present(objects, namespace)
        return all(finalizer in found.get(name, []) for name in wanted)
    return await wait_until(ready, timeout=timeout)


@dataclasses.dataclass
class Figures:
    """What a scenario reports; the assertions are made on these."""

    scenario: str
    seed: int
    objects: int = 0
    early_releases: list[str] = dataclasses.field(default_factory=list)
    stuck: list[str] = dataclasses.field(default_factory=list)
    operator_exits: list[int] = dataclasses.field(default_factory=list)
    callbacks: dict[str, float] = dataclasses.field(default_factory=dict)  # "operator/name" -> when sent
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    async def call_back(self, objects: client.CustomObjectsApi, namespace: str, name: str,
                        operator: str = "main", finalizer: str = DEFAULT_FINALIZER) -> None:
        """Send the callback; if the object or its finalizer is already gone, that release was early."""
        label = f"{operator}/{name}"
        self.callbacks[label] = time.monotonic()
        known = any(e.startswith(f"{label}:") for e in self.early_releases)  # once per object
        try:
            body = await objects.patch_namespaced_custom_object_status(
                "kopf.dev", "v1", namespace, "kopfexamples", name, {"status": {"chaos": {operator: "done"}}},
                _content_type=MERGE_PATCH)  # type: ignore[call-arg]
        except client.ApiException as e:
            if e.status != 404:
                raise
            if not known:
                self.early_releases.append(f"{operator}/{name}: gone before its callback")
            return
        if finalizer not in (body["metadata"].get("finalizers") or []) and not known:
            self.early_releases.append(f"{operator}/{name}: {finalizer} released before its callback")

    async def check_held(self, objects: client.CustomObjectsApi, namespace: str, names: Iterable[str],
                         operator: str = "main", finalizer: str = DEFAULT_FINALIZER) -> None:
        """Objects not yet called back must still be there with the finalizer."""
        found = await present(objects, namespace)
        for name in names:
            label = f"{operator}/{name}"
            if label not in self.callbacks and finalizer not in found.get(name, []):
                if not any(e.startswith(f"{label}:") for e in self.early_releases):
                    self.early_releases.append(f"{label}: {finalizer} gone without a callback")

    async def settle(self, objects: client.CustomObjectsApi, namespace: str, names: Iterable[str]) -> None:
        """After the last callback, with the operator up: what is still there after 60 s is stuck."""
        wanted = set(names)
        started = time.monotonic()

        async def gone() -> bool:
            return not wanted & set(await present(objects, namespace))
        await wait_until(gone, timeout=STUCK_AFTER, interval=0.5)
        self.stuck = sorted(wanted & set(await present(objects, namespace)))
        self.extra["settled_in_s"] = round(time.monotonic() - started, 2)
        for name in self.stuck:  # what the lead needs to see: the object as it is stuck
            body = await objects.get_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", name)
            meta = body["metadata"]
            self.extra.setdefault("stuck_state", {})[name] = {
                "finalizers": meta.get("finalizers"), "status": _short(body.get("status")),
                "annotations": {k: _short(v) for k, v in (meta.get("annotations") or {}).items()}}

    def evidence(self, ops: Operators, namespace: str, more: Iterable[str] = ()) -> None:
        """The operator's last log lines about each stuck or early-released object (and ``more``)."""
        names = set(self.stuck) | {e.split(":")[0].split("/", 1)[1] for e in self.early_releases} | set(more)
        records = [r for op in ops.all for r in op.records()]
        for name in sorted(names):
            lines = [f"{r.level} {r.message[:300]}" for r in records if r.object == f"{namespace}/{name}"]
            self.extra.setdefault("log", {})[name] = lines[-15:]

    def write(self, directory: Path = REPORT_DIR) -> Path:
        data = dataclasses.asdict(self)
        data.pop("callbacks")
        data["callbacks_sent"] = len(self.callbacks)
        text = json.dumps(data, indent=2, sort_keys=True, default=str)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.scenario}.json"
        path.write_text(text + "\n")
        return path


def _short(value: object, limit: int = 300) -> object:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return value if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def starts_figures(figures: Figures, system: ExternalSystem, names: Iterable[str], operator: str = "main") -> None:
    """Starts per object, raw and by idempotency key, into the figures."""
    counts = system.per_object(operator)
    rows = {name: counts.get(name, (0, 0)) for name in names}
    figures.extra[f"starts_raw_{operator}"] = sum(raw for raw, _ in rows.values())
    figures.extra[f"starts_max_raw_per_object_{operator}"] = max((raw for raw, _ in rows.values()), default=0)
    figures.extra[f"objects_not_started_exactly_once_by_key_{operator}"] = sorted(
        name for name, (_, keys) in rows.items() if keys != 1)
    figures.extra[f"keys_per_object_{operator}"] = {name: keys for name, (_, keys) in rows.items()}


def log_faults(text: str) -> dict[str, int]:
    """Tracebacks and Kopf's "unexpected error" lines in an operator's log."""
    return {"tracebacks": text.count("Traceback"), "unexpected_errors": text.count("unexpected error")}
