"""
Other objects that the API server selects for the operator (Kopf 1.45's
``settings.watching.label_selectors``/``field_selectors``, as sharded operators set them): an
object outside that selection is never seen, so a handler that waits for them must not take
"none seen" for "none" (a deletion would release its finalizer with a child left).
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes._kopf import dependents, selection
from kopf_outcomes.manager import PluginManager
from tests.unit import test_objects_safety
from tests.unit.conftest import Collector
from tests.unit.kopf_objects import Reason, changing_cause, handler, run_handlers
from tests.unit.test_objects_safety import CHILD, KopfWatcher, index_of
from tests.unit.test_patched_execution import BODY

pytestmark = pytest.mark.skipif(not hasattr(kopf.OperatorSettings().watching, "label_selectors"),
                                reason="Kopf < 1.45 selects nothing on the server: every object is seen")


installed = test_objects_safety.installed  # the fixture: the patch installed, no plugins


@pytest.fixture(autouse=True)
def forget_selections() -> Iterator[None]:
    yield
    selection.selected.clear()
    dependents._refused.clear()  # said once per handler: each test says it anew


@pytest.mark.parametrize(("labels", "label_selector", "within"), [
    ({"app": "db"}, "app=db", True),
    ({"app": "db", "tier": "x"}, "tier==x, app=db", True),
    ({"app": "db"}, "", True),  # no labels selected: all seen
    ({"app": "db"}, "app=web", False),  # another value: its objects are not watched at all
    ({"app": "db"}, "app=db,team=a", False),  # a label the source does not fix
    ({"app": "db"}, "app!=web", False),
    ({"app": "db"}, "app", False),
    ({"app": "db"}, "app in (db)", False),  # set-based: not read, so not trusted
    ({"app": "db"}, "app in (db,web)", False),
    ({"app": "{metadata.name}"}, "app=x", False),  # computed per parent: not fixed
])
def test_a_source_is_within_the_server_s_selection_only_where_its_fixed_labels_imply_it(
        labels: dict[str, str], label_selector: str, within: bool) -> None:
    assert kopf_outcomes.selected("v1", "configmaps", labels=labels).within(label_selector) is within
    assert kopf_outcomes.owned("v1", "configmaps").within(label_selector) is (label_selector == "")


async def _run_deletion(selectors: dict[str, str], source: Any, children: list[dict[str, Any]],
                        logger: logging.Logger, runs: list[int]) -> dict[Any, Any]:
    registry, settings = kopf.OperatorRegistry(), kopf.OperatorSettings()
    for name, selector in selectors.items():  # e.g. settings.watching.label_selectors["configmaps"] = "shard=a"
        getattr(settings.watching, name)["configmaps"] = selector

    @kopf_outcomes.depends_on_objects(source, registry=registry)
    async def fn(**_: Any) -> Any:
        runs.append(len(kopf_outcomes.recall().objects))
        return kopf_outcomes.Pending("children remain") if kopf_outcomes.recall().objects else None

    watcher = KopfWatcher(registry, namespace=BODY["metadata"]["namespace"], settings=settings)  # the parent's
    task = await watcher.start()
    await watcher.indexed.drop_toggle(watcher.toggle)  # listed: what the server sent is all there is
    try:
        cause = changing_cause(BODY, logger, reason=Reason.DELETE)
        cause.indices = index_of(source, *children)
        return await run_handlers([handler(fn)], cause)
    finally:
        watcher.stopped.set()
        await task


@pytest.mark.parametrize(("selectors", "said"), [
    ({"label_selectors": "shard=a"}, "v1/configmaps: labels 'shard=a'"),
    ({"field_selectors": "metadata.name!=x"}, "v1/configmaps: fields 'metadata.name!=x'"),
    ({"shard_selectors": "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')"},
     "v1/configmaps: shard \"shardRange(object.metadata.uid, '0x0', '0x8000000000000000')\""),
])
async def test_a_deletion_waiting_for_children_the_server_filters_out_is_held(
        selectors: dict[str, str], said: str, installed: PluginManager, logger: logging.Logger,
        collector: Collector) -> None:
    runs: list[int] = []
    # The operator watches only some ConfigMaps; the parent's child is not among them: Kopf's index is empty.
    outcomes = await _run_deletion(selectors, kopf_outcomes.owned("v1", "configmaps"), [], logger, runs)
    # Without the hold: run with no objects, succeeded, and the finalizer released with the child left.
    assert runs == [] and outcomes == {}
    [error] = [message for level, message in collector.pairs() if level >= logging.ERROR]
    assert f"asks the API server for a selection of them ({said}," in error
    assert "keeps its finalizer" in error


async def test_children_selected_by_the_same_fixed_labels_as_the_server_s_are_all_seen(
        installed: PluginManager, logger: logging.Logger, collector: Collector) -> None:
    runs: list[int] = []
    source = kopf_outcomes.selected("v1", "configmaps", labels={"shard": "a"})
    child = {**CHILD, "metadata": {**CHILD["metadata"], "labels": {"shard": "a"}}}
    outcomes = await _run_deletion({"label_selectors": "shard=a"}, source, [child], logger, runs)
    assert runs == [1] and outcomes[next(iter(outcomes))].final is False  # it runs, and waits for its child
    assert [message for level, message in collector.pairs() if level >= logging.ERROR] == []


def test_a_worker_of_no_resource_selects_nothing() -> None:
    """Kopf's own observers (of namespaces, of CRDs) run workers whose processor names no resource:
    selecting for them raised, and Kopf stopped the operator ("a framework bug")."""
    settings = kopf.OperatorSettings()
    settings.watching.label_selectors["configmaps"] = "shard=a"
    assert selection.server_selection(settings, None) == ("", "", "")
    assert selection.server_selection(None, None) == ("", "", "")
