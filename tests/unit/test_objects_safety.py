"""
Unknown is not none (issue 29, findings 1-3): each test reproduced a way a parent's finalizer
went while a child was left, or a stock Kopf kind was broken by a policy or a plugin.
"""
from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import Decision, HandlerRun, Outcome, hookimpl, objects
from kopf_outcomes._kopf import delays, listing
from kopf_outcomes._kopf.marks import Parked, Rechecking
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.policy import Policy, Scope
from tests.unit.conftest import Collector
from tests.unit.kopf_objects import (
    Reason,
    activities,
    aiotoggles,
    api_errors,
    body_after,
    cause_of,
    causes,
    changing_cause,
    configuration,
    ephemera,
    forbidden,
    handler,
    handler_of,
    lifecycles,
    parked_state,
    references,
    run_handlers,
)
from tests.unit.test_patched_execution import BODY

UID = BODY["metadata"]["uid"]
NS = BODY["metadata"]["namespace"]
CHILD = {"apiVersion": "v1", "kind": "ConfigMap",  # a child: no spec, as a plugin of the parent's kind expects
         "metadata": {"namespace": NS, "name": "child", "uid": "u-child", "resourceVersion": "1",
                      "ownerReferences": [{"uid": UID}]}}


class ReadsTheSpec:
    """A plugin written for the operator's own resource: every object it meets has a spec."""

    @hookimpl
    def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None:
        assert run.body is not None
        run.body["spec"]["size"]  # a ConfigMap has none: KeyError


class Observer:
    def __init__(self) -> None:
        self.kinds: list[str] = []

    @hookimpl
    def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome, patch: Any) -> None:
        self.kinds.append(run.kind)


@pytest.fixture
def installed(unpatched: None) -> Iterator[PluginManager]:
    declared = set(objects.declared)
    yield kopf_outcomes.install(entry_points=False)
    objects.declared.clear()
    objects.declared.update(declared)


@pytest.fixture
def explicit(unpatched: None) -> Iterator[PluginManager]:
    """The global policy line ``explicit_completion = true``."""
    yield kopf_outcomes.install(entry_points=False, policy=Policy(defaults=Scope(explicit_completion=True)))


def own_indexer(source: objects.Source) -> Any:
    """The project's own indexer of a source, as Kopf registered it."""
    registry = kopf.OperatorRegistry()
    objects._watch(source, registry)
    [indexer] = registry._indexing.get_all_handlers()
    return indexer


def errors(collector: Collector) -> list[str]:
    return [message for level, message in collector.pairs() if level >= logging.WARNING]


# --- 1. The project's own indexers and Kopf's stock kinds pass through no plugin or policy -------

async def test_the_own_indexer_keeps_a_child_that_a_failing_plugin_meets(
        installed: PluginManager, logger: logging.Logger, collector: Collector) -> None:
    installed.register(ReadsTheSpec(), name="reads-the-spec")
    source = kopf_outcomes.owned("v1", "configmaps")
    indexer = own_indexer(source)
    outcomes = await run_handlers([indexer], cause_of("index", CHILD, logger))
    outcome = outcomes[str(indexer.id)]
    # Was: the plugin's KeyError became a Retry, refused in an indexer (PermanentError): Kopf
    # dropped the child from the index, and its parent's deletion saw no children.
    assert outcome.exception is None
    assert outcome.result == source.entries(CHILD)
    assert errors(collector) == []


@pytest.mark.parametrize("kind", ["index", "event"])
async def test_explicit_completion_as_a_global_policy_leaves_stock_kinds_as_stock(
        kind: str, explicit: PluginManager, logger: logging.Logger, collector: Collector) -> None:
    async def fn(**_: Any) -> Mapping[str, str]:
        return {"key": "value"}  # neither True nor False

    handler = handler_of(kind, fn)
    outcome = (await run_handlers([handler], cause_of(kind, CHILD, logger)))[str(handler.id)]
    # Was: a Retry ("neither True nor False"), refused: an ERROR and an Event per child event.
    assert outcome.exception is None and outcome.final
    assert outcome.result == {"key": "value"}
    assert errors(collector) == []


@pytest.mark.parametrize("kind", ["webhook", "timer", "daemon", "activity"])
async def test_explicit_completion_as_a_global_policy_reads_only_persisting_kinds(
        kind: str, explicit: PluginManager, logger: logging.Logger, collector: Collector) -> None:
    async def fn(**_: Any) -> None:
        return None  # a webhook's "allowed", a timer's tick done, a startup activity's "configured"

    handler = handler_of(kind, fn)
    outcome = (await run_handlers([handler], cause_of(kind, BODY, logger)))[str(handler.id)]
    # Was: "explicit completion expects True or False, got None": every admission request rejected,
    # every timer tick and the operator's start retried at ERROR.
    assert outcome.exception is None and outcome.final
    assert errors(collector) == []


async def test_a_login_under_explicit_completion_gets_its_credentials_unlogged(
        explicit: PluginManager, caplog: pytest.LogCaptureFixture) -> None:
    registry = kopf.OperatorRegistry()
    secret = kopf.ConnectionInfo(server="https://127.0.0.1:6443", token="the-secret-token")

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        return secret

    with caplog.at_level(logging.DEBUG):
        results = await asyncio.wait_for(activities.run_activity(
            lifecycle=lifecycles.all_at_once, registry=registry, settings=configuration.OperatorSettings(),
            activity=causes.Activity.AUTHENTICATION, indices={}, memo=ephemera.Memo()), timeout=5)
    # Was: "explicit completion expects True or False, got ConnectionInfo(... token='...')": a Retry at
    # ERROR in 60 s, the login never done, and the token in the log.
    assert list(results.values()) == [secret]
    assert "the-secret-token" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_probe_under_explicit_completion_answers_with_its_value(
        explicit: PluginManager, caplog: pytest.LogCaptureFixture) -> None:
    registry = kopf.OperatorRegistry()

    @kopf.on.probe(registry=registry, id="queue")
    async def queue(**_: Any) -> Mapping[str, int]:
        return {"depth": 3}  # what the liveness endpoint reports: neither True nor False

    with caplog.at_level(logging.DEBUG):
        results = await asyncio.wait_for(activities.run_activity(
            lifecycle=lifecycles.all_at_once, registry=registry, settings=configuration.OperatorSettings(),
            activity=causes.Activity.PROBE, indices={}, memo=ephemera.Memo()), timeout=5)
    # Was: "explicit completion expects True or False": a Retry at ERROR after the backoff, and the
    # liveness endpoint's request hung until the kubelet killed the operator.
    assert list(results.values()) == [{"depth": 3}]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_the_own_indexer_under_explicit_completion_indexes_the_child(
        explicit: PluginManager, logger: logging.Logger, collector: Collector) -> None:
    source = kopf_outcomes.owned("v1", "configmaps")
    indexer = own_indexer(source)
    outcome = (await run_handlers([indexer], cause_of("index", CHILD, logger)))[str(indexer.id)]
    assert outcome.exception is None and outcome.result == source.entries(CHILD)
    assert errors(collector) == []


@pytest.mark.parametrize("kind", ["index", "event"])
async def test_observers_are_not_told_of_stock_kinds(kind: str, installed: PluginManager,
                                                    logger: logging.Logger) -> None:
    observer = Observer()
    installed.register(observer, name="observer")

    async def fn(**_: Any) -> str:
        return "value"

    handler = handler_of(kind, fn)
    outcome = (await run_handlers([handler], cause_of(kind, CHILD, logger)))[str(handler.id)]
    assert outcome.result == "value"
    assert observer.kinds == []


@pytest.mark.parametrize("kind", ["index", "event"])
async def test_a_handlers_own_outcome_in_a_stock_kind_is_still_refused_without_plugins(
        kind: str, installed: PluginManager, logger: logging.Logger, collector: Collector) -> None:
    observer = Observer()
    installed.register(observer, name="observer")

    async def fn(**_: Any) -> Outcome:
        raise kopf_outcomes.Pending("waiting")

    handler = handler_of(kind, fn)
    outcome = (await run_handlers([handler], cause_of(kind, CHILD, logger)))[str(handler.id)]
    assert isinstance(outcome.exception, kopf.PermanentError)
    assert f"kind {kind!r}" in str(outcome.exception)
    assert [level for level, _ in collector.pairs() if level >= logging.WARNING] == [logging.ERROR]
    assert observer.kinds == []


# --- 2. A sub-handler's objects, and kinds that cannot hold: never "none" -----------------------

def index_of(source: objects.Source, *children: Mapping[str, Any]) -> dict[str, Any]:
    """Kopf's index of the source as it holds these children (a plain mapping of stores)."""
    index: dict[str, list[objects.ObjectRef]] = {}
    for body in children:
        for key, ref in source.entries(body).items():
            index.setdefault(key, []).append(ref)
    return {source.index: index}


async def test_a_sub_handler_that_depends_on_objects_is_held_with_its_parent(
        installed: PluginManager, logger: logging.Logger, collector: Collector) -> None:
    source = kopf_outcomes.owned("v1", "configmaps")
    runs: list[int] = []

    @kopf_outcomes.depends_on_objects(source, registry=kopf.OperatorRegistry())
    async def child(**_: Any) -> Any:  # the documented check, in a sub-handler
        runs.append(len(kopf_outcomes.recall().objects))
        return kopf_outcomes.Pending("children remain") if kopf_outcomes.recall().objects else None

    async def parent(**_: Any) -> None:
        await kopf.execute(fns={"child": child})

    h = handler(parent, id="parent")
    state, body = None, BODY
    for attempt in range(2):  # the second: the object changed, the parent (and its sub-handler) run again
        cause = changing_cause(body, logger, reason=Reason.DELETE)
        cause.indices = index_of(source, CHILD)
        outcomes = await run_handlers([h], cause, state)
        state, body = parked_state([h], outcomes), body_after(cause, status={"attempt": attempt})
        # Was: it ran with no objects, succeeded, and the parent's deletion released the finalizer.
        assert runs == []
        assert outcomes["parent"].final is False
        # Parked, not rechecking: quiet rechecks would count against the parent's retries=, and
        # a delete handler past them fails, which releases the finalizer by default.
        assert isinstance(outcomes["parent"].exception, Parked)
        assert not isinstance(outcomes["parent"].exception, Rechecking)
    [error] = [message for level, message in collector.pairs() if level >= logging.ERROR]  # once
    assert "'parent/child'" in error and "Declare depends_on_objects(...) on 'parent'" in error


@pytest.mark.parametrize("kind", ["timer", "daemon", "index", "event", "webhook"])
async def test_a_kind_that_cannot_hold_never_reads_its_objects_as_none(
        kind: str, installed: PluginManager, logger: logging.Logger) -> None:
    source = kopf_outcomes.owned("v1", "configmaps")
    seen: list[str] = []

    @kopf_outcomes.depends_on_objects(source, registry=kopf.OperatorRegistry())
    async def fn(**_: Any) -> Any:
        try:
            seen.append("none" if not kopf_outcomes.recall().objects else "some")
        except kopf_outcomes.ObjectsUnknownError as e:
            seen.append(str(e))

    h = handler_of(kind, fn)
    cause = cause_of(kind, BODY, logger)
    cause.indices = index_of(source, CHILD)
    await run_handlers([h], cause)
    # Was: told (with one ERROR) that they are ignored here; then recall().objects == (): "none".
    [message] = seen
    assert f"handler of kind {kind!r}" in message and "only a change handler" in message


# --- 3. Objects that cannot be known yet (a listing under way) or at all (a forbidden listing) ---

class KopfWatcher:
    """Kopf's watcher of the children's resource in a namespace that appeared after the start, as
    our wrapper of it sees it: its toggle in Kopf's readiness of the indices, dropped when listed."""

    def __init__(self, registry: kopf.OperatorRegistry, namespace: str = "new",
                 settings: kopf.OperatorSettings | None = None) -> None:
        self.registry, self.namespace, self.settings = registry, namespace, settings or kopf.OperatorSettings()
        self.indexed = aiotoggles.ToggleSet(all)
        self.stopped = asyncio.Event()
        self.failure: BaseException | None = None

    async def start(self) -> asyncio.Task[None]:
        self.toggle = await self.indexed.make_toggle(name=f"configmaps@{self.namespace}")

        async def original(**_: Any) -> None:
            await self.stopped.wait()
            if self.failure is not None:
                raise self.failure

        kwargs = dict(resource=references.Resource("", "v1", "configmaps", namespaced=True), namespace=self.namespace,
                      settings=self.settings,
                      operator_indexed=self.indexed, resource_indexed=self.toggle,
                      processor=functools.partial(print, registry=self.registry))
        task = asyncio.create_task(listing.watched(original, kwargs))
        await asyncio.sleep(0)
        return task


async def test_a_handler_whose_objects_are_still_being_listed_is_held_until_they_are(
        installed: PluginManager, logger: logging.Logger, collector: Collector) -> None:
    registry = kopf.OperatorRegistry()
    source = kopf_outcomes.owned("v1", "configmaps")
    runs: list[int] = []

    @kopf_outcomes.depends_on_objects(source, registry=registry)
    async def fn(**_: Any) -> Any:
        runs.append(len(kopf_outcomes.recall().objects))
        return kopf_outcomes.Pending("children remain") if kopf_outcomes.recall().objects else None

    listed = KopfWatcher(registry, namespace=NS)  # the parent's namespace, watched from the start
    listed_task = await listed.start()
    await listed.indexed.drop_toggle(listed.toggle)
    watcher = KopfWatcher(registry)
    task = await watcher.start()
    try:
        h = handler(fn)
        cause = changing_cause(BODY, logger, reason=Reason.DELETE)
        cause.indices = index_of(source)  # Kopf's index: empty, its listing under way
        outcomes = await run_handlers([h], cause)
        # Was: run with no objects, succeeded: the finalizer released with the child left.
        assert runs == [] and outcomes == {}
        told = delays.take(cause.patch)
        assert told is not None and told.rechecks  # it looks again soon, without a write
        assert any("waits for Kopf to list its other objects (configmaps (core/v1) in namespace 'new'" in message
                   for message in collector.messages(logging.INFO))
        await watcher.indexed.drop_toggle(watcher.toggle)  # Kopf: listed
        cause = changing_cause(BODY, logger, reason=Reason.DELETE)
        cause.indices = index_of(source, CHILD)
        await run_handlers([h], cause)
        assert runs == [1]
    finally:
        watcher.stopped.set()
        listed.stopped.set()
        await asyncio.gather(task, listed_task)


async def test_a_forbidden_listing_names_the_permission_to_grant(
        installed: PluginManager, caplog: pytest.LogCaptureFixture) -> None:
    registry = kopf.OperatorRegistry()
    kopf_outcomes.depends_on_objects(kopf_outcomes.owned("v1", "configmaps"), registry=registry)(lambda **_: None)
    watcher = KopfWatcher(registry, namespace="locked")
    task = await watcher.start()
    watcher.failure = forbidden('configmaps is forbidden: User "op" cannot list resource "configmaps"')
    watcher.stopped.set()
    with caplog.at_level(logging.ERROR, logger="kopf_outcomes"), pytest.raises(api_errors.APIForbiddenError):
        await task  # Kopf's own end of it stands: its watcher fails, and the operator stops
    [error] = [r.getMessage() for r in caplog.records if r.name == "kopf_outcomes"]
    assert "Grant it the verbs 'list' and 'watch' on 'configmaps' of the API group '' in namespace 'locked'" in error
    assert "keep their finalizers" in error and 'cannot list resource "configmaps"' in error
