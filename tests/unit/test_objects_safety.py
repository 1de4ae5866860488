"""
Unknown is not none (issue 29, findings 1-3): each test reproduced a way a parent's finalizer
went while a child was left, or a stock Kopf kind was broken by a policy or a plugin.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import Decision, HandlerRun, Outcome, hookimpl, objects
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.policy import Policy, Scope
from tests.unit.conftest import Collector
from tests.unit.kopf_objects import cause_of, handler_of, run_handlers
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
