"""
Which objects a handler's sources see, and which objects a shard refuses (issue 41 findings 2-4,
issue 43 findings 3-4), through Kopf's own processing of each object's events (its worker, its
indexers, its release of the finalizer): an object where the operator does not watch is unknown,
not none; a cluster-scoped parent selects in every namespace; a shard refuses only its own
resource; several sources that name one object keep every source's fields; a change wakes only
the parents of its own resource.
"""
from __future__ import annotations

import asyncio
import copy
import functools
import logging
from collections.abc import Iterator, Mapping
from typing import Any, Literal

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import objects, shards
from kopf_outcomes._kopf import dependents, listing
from tests.unit.conftest import Collector
from tests.unit.kopf_objects import (
    Reason,
    aiotoggles,
    api,
    body_after,
    changing_cause,
    configuration,
    ephemera,
    handlers_of,
    indexing,
    inventory,
    lifecycles,
    merged,
    parked_state,
    processing,
    queueing,
    references,
    run_handlers,
)

NS = "apps"
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
LABEL = "example.com/shard"
TENANT = "example.com/tenant"
EXAMPLES = references.Resource("kopf.dev", "v1", "kopfexamples", namespaced=True)
CLUSTERED = references.Resource("kopf.dev", "v1", "clusterkopfexamples", namespaced=False)
SECRETS = references.Resource("", "v1", "secrets", namespaced=True)
CONFIGMAPS = references.Resource("", "v1", "configmaps", namespaced=True)
JOBS = references.Resource("batch", "v1", "jobs", namespaced=True)
PODS = references.Resource("", "v1", "pods", namespaced=True)


# The object whose event Kopf processes now: the fake API server answers a PATCH with it as patched.
_current: list[Mapping[str, Any]] = [{}]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Kopf's PATCH requests (no cluster in unit tests), answered with the object as patched."""
    requests: list[Any] = []

    async def patch(*, payload: Any, **_: Any) -> Any:
        requests.append(payload)
        return merged(copy.deepcopy(dict(_current[0])), payload) if isinstance(payload, Mapping) else _current[0]
    monkeypatch.setattr(api, "patch", patch)
    return requests


@pytest.fixture
def installed(unpatched: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(dependents, "_refused", set())  # told once per handler: here once per test
    declared = set(objects.declared)
    kopf_outcomes.install(entry_points=False, events=False)
    yield
    kopf_outcomes.uninstall()
    objects.declared.clear()
    objects.declared.update(declared)
    shards.declared = None


def released(sent: list[Any]) -> bool:
    """Whether one of Kopf's patches removed the finalizer (a JSON patch, or a merge-patch before 1.38)."""
    for payload in sent:
        ops = payload if isinstance(payload, list) else []
        if any(op.get("op") == "remove" and op.get("path", "").startswith("/metadata/finalizers") for op in ops):
            return True
        if any(op.get("op") == "replace" and op.get("path") == "/metadata/finalizers"
               and FINALIZER not in op.get("value", []) for op in ops):
            return True
        finalizers = ((payload.get("metadata") or {}) if isinstance(payload, Mapping) else {}).get("finalizers")
        if finalizers is not None and FINALIZER not in finalizers:
            return True
    return False


def body(name: str, namespace: str | None = NS, *, kind: str = "KopfExample", api: str = "kopf.dev/v1",
         deleting: bool = False, labels: Mapping[str, str] | None = None, **fields: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{namespace}-{name}", "resourceVersion": "1",
                            "labels": dict(labels or {})}
    if namespace is not None:
        meta["namespace"] = namespace
    if deleting:  # an object of the operator's, deleted: its finalizer holds it
        meta.update(deletionTimestamp="2026-12-06T00:00:00Z", finalizers=[FINALIZER])
    return {"apiVersion": api, "kind": kind, "metadata": meta, **fields}


class _Pressed(asyncio.Event):
    """Kopf's stream pressure where the end of the stream is queued: whoever would sleep until the
    next event (a held handler's recheck, Kopf's own waits) finds it there at once."""

    async def wait(self) -> Literal[True]:
        self.set()
        return await super().wait()


class Operator:
    """One operator's Kopf machinery around a registry: its indexers, and each object's events
    processed by Kopf's worker (ours around it, as installed) and Kopf's processing."""

    def __init__(self, registry: kopf.OperatorRegistry) -> None:
        self.registry, self.settings = registry, configuration.OperatorSettings()
        self.settings.persistence.consistency_timeout = 0  # no further event comes: the worker does not wait
        self.indexers = indexing.OperatorIndexers()
        self.indexers.ensure(registry._indexing.get_all_handlers())
        self.memories = inventory.ResourceMemories()
        self.watchers: list[asyncio.Task[None]] = []

    async def watch(self, resource: Any, namespace: str | None, *, end: bool = False) -> None:
        """Kopf's watcher of the resource in a namespace (None: cluster-wide), its listing over; it
        keeps watching until the test ends, or ends now (``end``: Kopf saw the namespace go)."""
        indexed = aiotoggles.ToggleSet(all)
        toggle = await indexed.make_toggle(name=f"{resource.plural}@{namespace}")
        listed = asyncio.Event()

        async def original(**_: Any) -> None:
            await indexed.drop_toggle(toggle)
            listed.set()
            if not end:
                await asyncio.Event().wait()  # watching: cancelled when the test's loop closes

        watcher = asyncio.create_task(listing.watched(original, dict(
            resource=resource, namespace=namespace, settings=self.settings, operator_indexed=indexed,
            resource_indexed=toggle, processor=functools.partial(print, registry=self.registry))))
        self.watchers.append(watcher)
        await (watcher if end else listed.wait())

    async def process(self, resource: Any, obj: Mapping[str, Any], event: str = "MODIFIED") -> None:
        _current[0] = obj
        key = (resource, obj["metadata"]["uid"])
        backlog: asyncio.Queue[Any] = asyncio.Queue()
        backlog.put_nowait({"type": event, "object": obj})
        backlog.put_nowait(queueing.EOS.token)
        processor = functools.partial(
            processing.process_resource_event, lifecycle=lifecycles.all_at_once, indexers=self.indexers,
            registry=self.registry, settings=self.settings, memories=self.memories, memobase=ephemera.Memo(),
            resource=resource, event_queue=asyncio.Queue())
        pressure = _Pressed()
        await queueing.worker(signaller=asyncio.Condition(), settings=self.settings, processor=processor,
                              resource_indexed=None, operator_indexed=None,
                              streams={key: queueing.Stream(backlog, pressure)}, key=key)


def errors(collector: Collector) -> list[str]:
    return [message for level, message in collector.pairs() if level >= logging.ERROR]


@pytest.fixture
def kopf_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    return caplog


def deletion(resource_args: tuple[str, ...], source: objects.Source, seen: list[int]) -> kopf.OperatorRegistry:
    """A deletion handler that waits while any of its objects remains (the how-to's shape)."""
    registry = kopf.OperatorRegistry()

    @kopf_outcomes.depends_on_objects(source, registry=registry)
    @kopf.on.delete(*resource_args, registry=registry)
    def delete_fn(**_: Any) -> Any:
        found = kopf_outcomes.recall().objects
        seen.append(len(found))
        return kopf_outcomes.Pending(f"{len(found)} remain") if found else None
    return registry


def held_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.ERROR and "does not watch them" in r.getMessage()]


# --- Issue 41 finding 2: a reference into a namespace the operator does not watch -----------------

async def test_a_reference_into_an_unwatched_namespace_holds_the_deletion(
        installed: None, sent: list[Any], kopf_logs: pytest.LogCaptureFixture) -> None:
    seen: list[int] = []
    op = Operator(deletion(("kopf.dev", "v1", "kopfexamples"),
                           kopf_outcomes.referenced("v1", "secrets", field="spec.lockRef"), seen))
    await op.watch(SECRETS, NS)  # --namespace=apps: the secrets of "vault" are not watched
    await op.process(EXAMPLES, body("p", deleting=True, spec={"lockRef": "vault/lock"}))
    # Was: "vault/lock" read as absent, the handler done, the finalizer released.
    assert seen == [] and not released(sent)
    [error] = held_errors(kopf_logs)
    assert "v1/secrets in namespace 'vault' (watched in 'apps')" in error
    assert "--namespace for that namespace too, or with --all-namespaces" in error


async def test_a_reference_into_a_watched_namespace_reads_an_absent_object_as_none(
        installed: None, sent: list[Any], kopf_logs: pytest.LogCaptureFixture) -> None:
    seen: list[int] = []
    op = Operator(deletion(("kopf.dev", "v1", "kopfexamples"),
                           kopf_outcomes.referenced("v1", "secrets", field="spec.lockRef"), seen))
    await op.watch(SECRETS, NS)
    await op.watch(SECRETS, "vault")
    await op.process(EXAMPLES, body("p", deleting=True, spec={"lockRef": "vault/lock"}))
    assert seen == [0] and released(sent) and held_errors(kopf_logs) == []


# --- Issue 41 finding 3: the children of a cluster-scoped parent ----------------------------------

@pytest.mark.parametrize("source", [kopf_outcomes.owned("v1", "configmaps"),
                                    kopf_outcomes.selected("v1", "configmaps", labels={TENANT: "{metadata.name}"})],
                         ids=["owned", "selected"])
async def test_children_of_a_cluster_scoped_parent_under_namespace_hold_the_deletion(
        source: objects.Source, installed: None, sent: list[Any], kopf_logs: pytest.LogCaptureFixture) -> None:
    seen: list[int] = []
    op = Operator(deletion(("kopf.dev", "v1", "clusterkopfexamples"), source, seen))
    await op.watch(CONFIGMAPS, NS)  # --namespace=apps: a child in another namespace is unseen
    await op.process(CLUSTERED, body("t1", None, kind="ClusterKopfExample", deleting=True))
    # Was: no children found (those elsewhere unseen), the finalizer released.
    assert seen == [] and not released(sent)
    [error] = held_errors(kopf_logs)
    assert "v1/configmaps in any namespace (watched in 'apps')" in error


@pytest.mark.parametrize("source", [kopf_outcomes.owned("v1", "configmaps"),
                                    kopf_outcomes.selected("v1", "configmaps", labels={TENANT: "{metadata.name}"})],
                         ids=["owned", "selected"])
async def test_a_cluster_scoped_parent_finds_its_children_in_every_namespace(
        source: objects.Source, installed: None, sent: list[Any], kopf_logs: pytest.LogCaptureFixture) -> None:
    seen: list[int] = []
    op = Operator(deletion(("kopf.dev", "v1", "clusterkopfexamples"), source, seen))
    await op.watch(CONFIGMAPS, None)  # --all-namespaces
    parent = body("t1", None, kind="ClusterKopfExample", deleting=True)
    child = body("c", "elsewhere", kind="ConfigMap", api="v1", labels={TENANT: "t1"})
    child["metadata"]["ownerReferences"] = [{"uid": parent["metadata"]["uid"]}]
    await op.process(CONFIGMAPS, child)  # Kopf's indexers learn of it
    await op.process(CLUSTERED, parent)
    # Was (selected): looked only among cluster-scoped configmaps, found none, released.
    assert seen == [1] and not released(sent) and held_errors(kopf_logs) == []


# --- Issue 41 finding 4: a shard refuses only its own resource's other shards ---------------------

def sharded_registry(seen: list[str]) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry,
                   labels=kopf_outcomes.shard(LABEL, "a"))(lambda **_: seen.append("example"))
    kopf.on.delete("v1", "configmaps", registry=registry)(lambda **_: seen.append("configmap"))
    return registry


async def test_a_shard_releases_an_object_of_another_unsharded_resource(installed: None, sent: list[Any]) -> None:
    seen: list[str] = []
    op = Operator(sharded_registry(seen))
    await op.process(CONFIGMAPS, body("cm", kind="ConfigMap", api="v1", deleting=True))
    # Was: the handler ran, and the finalizer stayed forever (no shard label: "another shard's").
    assert seen == ["configmap"] and released(sent)


async def test_a_shard_still_refuses_its_own_resources_other_shards(installed: None, sent: list[Any]) -> None:
    seen: list[str] = []
    op = Operator(sharded_registry(seen))
    await op.process(EXAMPLES, body("b", deleting=True, labels={LABEL: "b"}))
    await op.process(EXAMPLES, body("none", deleting=True))  # no label: waits for a shard
    assert seen == [] and not released(sent)
    await op.process(EXAMPLES, body("mine", deleting=True, labels={LABEL: "a"}))
    assert seen == ["example"] and released(sent)


# --- Issue 43 finding 3: two sources that name one object keep both sources' fields --------------

@pytest.mark.parametrize("order", ["selected-first", "owned-first"])
async def test_two_sources_that_name_one_job_keep_both_fields(
        order: str, installed: None, sent: list[Any], logger: logging.Logger) -> None:
    by_label = kopf_outcomes.selected("batch/v1", "jobs", labels={"example.com/parent": "{metadata.name}"},
                                      fields=["status.succeeded"])
    by_owner = kopf_outcomes.owned("batch/v1", "jobs")
    registry = kopf.OperatorRegistry()
    seen: list[tuple[object, ...]] = []

    @kopf_outcomes.depends_on_objects(*((by_label, by_owner) if order == "selected-first" else (by_owner, by_label)),
                                      registry=registry)
    @kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry)
    def delete_fn(**_: Any) -> Any:
        [job] = kopf_outcomes.recall().objects
        seen.append(job.fields)
        return None if job.fields[0] == 1 else kopf_outcomes.Pending("the cleanup Job runs")

    op = Operator(registry)
    parent = body("p", deleting=True)
    job = body("cleanup", kind="Job", api="batch/v1", labels={"example.com/parent": "p"})
    job["metadata"]["ownerReferences"] = [{"uid": parent["metadata"]["uid"]}]
    await op.process(JOBS, job)
    [h] = handlers_of(registry)
    cause = changing_cause(parent, logger, reason=Reason.DELETE)
    cause.indices = op.indexers.indices
    outcomes = await run_handlers([h], cause)
    assert seen == [(None,)]  # was (owned last): () and an IndexError: "fields" dropped
    await op.process(JOBS, {**job, "status": {"succeeded": 1}})  # the Job succeeded: a state of the handler
    cause = changing_cause(body_after(cause), logger, reason=Reason.DELETE)
    cause.indices = op.indexers.indices
    outcomes = await run_handlers([h], cause, parked_state([h], outcomes))
    assert seen == [(None,), (1,)] and outcomes[str(h.id)].final


def test_an_object_that_several_sources_name_has_the_first_sources_fields_first() -> None:
    a = kopf_outcomes.owned("batch/v1", "jobs", fields=["status.succeeded", "metadata.name"])
    b = kopf_outcomes.owned("batch/v1", "jobs", fields=["status.failed", "status.succeeded"])
    parent = body("p")
    job = body("j", kind="Job", api="batch/v1", status={"succeeded": 1, "failed": 0})
    job["metadata"]["ownerReferences"] = [{"uid": parent["metadata"]["uid"]}]
    indices = {s.index: {key: [ref]} for s in (a, b) for key, ref in s.entries(job).items()}
    [one] = objects.lookup([a], parent, indices)
    assert one.fields == (1, "j")  # one source: its order, as before
    [ab], [ba] = objects.lookup([a, b], parent, indices), objects.lookup([b, a], parent, indices)
    assert ab.fields == (1, "j", 0) and ba.fields == (0, 1, "j")  # the first source's order, then the others' new paths
    assert ab.field("status.failed") == ba.field(["status", "failed"]) == 0 and ab.field("metadata.name") == "j"
    with pytest.raises(KeyError, match="status.active"):
        ab.field("status.active")


# --- Issue 43 finding 4: a change wakes only the parents of its own resource ----------------------

async def test_an_object_of_another_resource_with_the_same_name_or_labels_wakes_no_one(installed: None) -> None:
    registry = kopf.OperatorRegistry()
    secret = kopf_outcomes.referenced("v1", "secrets", field="spec.lockRef")
    jobs = kopf_outcomes.selected("batch/v1", "jobs", labels={"example.com/parent": "{metadata.name}"})
    kopf_outcomes.depends_on_objects(secret, jobs, registry=registry)(lambda **_: None)
    op = Operator(registry)
    parent = body("p", spec={"lockRef": "lock"})
    woken = asyncio.Event()
    forget = objects.wait([*secret.wake_keys(parent), *jobs.wake_keys(parent)], woken)
    try:
        await op.process(CONFIGMAPS, body("lock", kind="ConfigMap", api="v1"))  # named like the Secret
        await op.process(PODS, body("pod", kind="Pod", api="v1", labels={"example.com/parent": "p"}))  # a Job's labels
        assert not woken.is_set()  # was: woken by each (a Kopf cycle each, a LIST under shard selection)
        await op.process(SECRETS, body("lock", kind="Secret", api="v1"))
        assert woken.is_set()
        woken.clear()
        await op.process(JOBS, body("job", kind="Job", api="batch/v1", labels={"example.com/parent": "p"}))
        assert woken.is_set()
    finally:
        forget()
