"""
Adversarial review of the fail-closed change (issue 41 findings 1, 6, 7; issue 44 #12): each
suspicion is a history through Kopf's real processing (``process_resource_event``) against the
one-object fake API server of :mod:`tests.unit.test_fail_closed`; what is asserted is the
object's finalizer. A test marked ``xfail(strict=True)`` is a promise that breaks.
"""
from __future__ import annotations

import asyncio
import copy
import datetime
import json
import logging
from collections.abc import Callable, Generator
from typing import Any

import kopf
import pytest
from kopf._cogs.configs import configuration
from kopf._cogs.structs import ephemera
from kopf._core.reactor import inventory, processing

import kopf_outcomes
from kopf_outcomes import Fatal, HandlerOptions, ResourceRef, engine, hookimpl
from kopf_outcomes.manager import PluginManager
from tests.unit.kopf_objects import cause_of, handler_of, run_handlers
from tests.unit.releases import stamped
from tests.unit.test_fail_closed import NO_THROTTLING, RESOURCE, FailingOptions, Server, installed, on_delete
from tests.unit.test_objects_safety import CHILD, index_of
from tests.unit.test_objects_safety import installed as objects_installed  # noqa: F401  # a fixture
from tests.unit.test_patched_execution import BODY


class Aging(Server):
    """The fake server, whose Kopf progress (``started``, ``delayed``) can be moved into the past:
    a retry's backoff is due, or a handler's ``timeout=`` passed, without sleeping."""

    def age(self, seconds: float) -> None:
        meta = self.body["metadata"]
        for key, value in list((meta.get("annotations") or {}).items()):
            if key.startswith("kopf.zalando.org/") and isinstance(value, str) and value.startswith("{"):
                meta["annotations"][key] = json.dumps(_aged(json.loads(value), seconds))
        progress = self.body.get("status", {}).get("kopf", {}).get("progress", {})
        for handler_id, state in progress.items():
            progress[handler_id] = _aged(state, seconds)

    async def run(self, registry: kopf.OperatorRegistry, count: int, age: float = 1.0,
                  lifecycle: Any = kopf.lifecycles.all_at_once) -> None:
        settings = configuration.OperatorSettings()
        memories = inventory.ResourceMemories()
        for _ in range(count):
            if not self.finalized:
                return
            self.age(age)
            await processing.process_resource_event(
                lifecycle=lifecycle, indexers=processing.indexing.OperatorIndexers(),
                registry=registry, settings=settings, memories=memories, memobase=ephemera.Memo(),
                resource=RESOURCE, raw_event={"type": "MODIFIED", "object": copy.deepcopy(self.body)},
                event_queue=asyncio.Queue(), **NO_THROTTLING)  # type: ignore[arg-type]


def _aged(state: dict[str, Any], seconds: float) -> dict[str, Any]:
    def earlier(stamp: str) -> str:
        return (datetime.datetime.fromisoformat(stamp) - datetime.timedelta(seconds=seconds)).isoformat()
    return {key: earlier(value) if key in ("started", "delayed") and value else value
            for key, value in state.items()}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Aging:
    return Aging(monkeypatch)


class Flaky:
    """An options plugin whose store is down while ``broken``; then it answers ``options``."""

    def __init__(self, options: HandlerOptions, broken: bool = True) -> None:
        self.options, self.broken = options, broken

    @hookimpl
    def kopf_outcomes_handler_options(self, handler_id: str, resource: ResourceRef | None) -> HandlerOptions | None:
        if self.broken:
            raise RuntimeError("options store unreachable")
        return self.options


def errors_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]


# --- retries= / timeout= spent while held -----------------------------------------------------


async def test_retries_spent_while_held_do_not_release_once_the_plugin_answers(
        server: Aging, tmp_path: Any, unpatched: None) -> None:
    """The plugin says explicit_completion; the handler says "not done" (False). While the plugin
    is down the run is held; once it answers, the handler must run and pend, never be failed by
    retries the holds used up."""
    runs: list[int] = []

    def not_done(**_: Any) -> bool:
        runs.append(1)
        return False
    plugin = Flaky(HandlerOptions(explicit_completion=True))
    for _ in installed(tmp_path, "", plugin):
        await server.run(on_delete(not_done, retries=2), count=4)
        assert server.finalized
        held = len(runs)
        plugin.broken = False
        await server.run(on_delete(not_done, retries=2), count=3)
    assert server.finalized and len(runs) > held, (len(runs), held)


async def test_retries_spent_while_held_do_not_strand_a_handler_that_now_succeeds(
        server: Aging, tmp_path: Any, unpatched: None, caplog: pytest.LogCaptureFixture) -> None:
    runs: list[int] = []

    def cleanup(**_: Any) -> None:
        runs.append(1)
    plugin = Flaky(HandlerOptions())
    for _ in installed(tmp_path, 'fatal_on_delete = "retain"\n', plugin):
        await server.run(on_delete(cleanup, retries=2), count=4)
        assert server.finalized
        plugin.broken = False
        await server.run(on_delete(cleanup, retries=2), count=3)
    assert not server.finalized, errors_of(caplog)[-3:]


async def test_a_hold_longer_than_the_timeout_does_not_strand_a_handler_that_now_succeeds(
        server: Aging, tmp_path: Any, unpatched: None, caplog: pytest.LogCaptureFixture) -> None:
    runs: list[int] = []

    def cleanup(**_: Any) -> None:
        runs.append(1)
    plugin = Flaky(HandlerOptions())
    for _ in installed(tmp_path, 'fatal_on_delete = "retain"\n', plugin):
        await server.run(on_delete(cleanup, timeout=60), count=3, age=100)
        assert server.finalized
        plugin.broken = False
        await server.run(on_delete(cleanup, timeout=60), count=3)
    assert not server.finalized, errors_of(caplog)[-3:]


async def test_retries_exhausted_while_the_plugin_is_down_still_hold(
        server: Aging, tmp_path: Any, unpatched: None) -> None:
    """Guard: Kopf's own "exceeded retries" (a final outcome) under a fault is held too."""
    def flaky(**_: Any) -> None:
        raise kopf.TemporaryError("backend busy", delay=0.01)
    for _ in installed(tmp_path, "", FailingOptions()):
        await server.run(on_delete(flaky, retries=2), count=6)
    assert server.finalized


async def test_control_without_a_fault_the_same_not_done_handler_pends_and_keeps_the_finalizer(
        server: Aging, tmp_path: Any, unpatched: None) -> None:
    """The control of the two tests above: with the plugin answering throughout, the same handler
    pends for as many cycles (Pending is not counted against retries=): the release above is the holds'."""
    def not_done(**_: Any) -> bool:
        return False
    for _ in installed(tmp_path, "", Flaky(HandlerOptions(explicit_completion=True), broken=False)):
        await server.run(on_delete(not_done, retries=2), count=7)
    assert server.finalized


class FirstCallFails(Flaky):
    """Fails on its first call only: the run starts with unread options, its conclusion reads them."""

    def kopf_outcomes_handler_options(self, handler_id: str, resource: ResourceRef | None) -> HandlerOptions | None:
        calls = getattr(self, "calls", 0)
        self.calls = calls + 1
        if calls == 0:
            raise RuntimeError("options store unreachable")
        return self.options
    kopf_outcomes_handler_options = hookimpl(kopf_outcomes_handler_options)


async def test_a_plugin_failing_on_its_first_call_only_keeps_a_retain(
        server: Aging, tmp_path: Any, unpatched: None) -> None:
    """Guard: the run began with unread options, the conclusion reads retain: kept, not released."""
    def gone(**_: Any) -> None:
        raise kopf.PermanentError("the backend refuses")
    for _ in installed(tmp_path, "", FirstCallFails(HandlerOptions(fatal_on_delete="retain"))):
        await server.run(on_delete(gone), count=4)
    assert server.finalized


class RaisingAdjuster:
    """A plugin whose kopf_outcomes_adjust_outcome raises: contained as a PluginFailure (a Retry)."""

    @hookimpl
    def kopf_outcomes_adjust_outcome(self, run: Any, decision: Any) -> None:
        raise RuntimeError("adjuster broken")


async def test_a_raising_adjust_outcome_plugin_never_releases_a_not_done_deletion_under_retries(
        server: Aging, tmp_path: Any, unpatched: None) -> None:
    """The same counting outside options: PluginFailure says "never turned into a failure by the
    handler's retries=/timeout=", but Kopf's own pre-run check counts each one."""
    def not_done(**_: Any) -> bool:
        return False
    for _ in installed(tmp_path, "explicit_completion = true\n", RaisingAdjuster()):
        await server.run(on_delete(not_done, retries=2), count=6)
    assert server.finalized


ESCALATE = 'escalate = [{ after_tries = 3, outcome = "fatal" }]\n'


async def test_control_pending_runs_do_not_reach_a_policys_after_tries_escalation(
        server: Aging, tmp_path: Any, unpatched: None) -> None:
    """The control: six runs of a "not done" under explicit_completion, the plugin answering: kept."""
    def not_done(**_: Any) -> bool:
        return False
    for _ in installed(tmp_path, ESCALATE, Flaky(HandlerOptions(explicit_completion=True), broken=False)):
        await server.run(on_delete(not_done), count=6)
    assert server.finalized


async def test_holds_do_not_count_towards_a_policys_after_tries_escalation(
        server: Aging, tmp_path: Any, unpatched: None, caplog: pytest.LogCaptureFixture) -> None:
    """The same six runs, the first four held while the plugin was down."""
    def not_done(**_: Any) -> bool:
        return False
    plugin = Flaky(HandlerOptions(explicit_completion=True))
    for _ in installed(tmp_path, ESCALATE, plugin):
        await server.run(on_delete(not_done), count=4)
        assert server.finalized
        plugin.broken = False
        await server.run(on_delete(not_done), count=2)
    assert server.finalized, errors_of(caplog)[-1:]


# --- wrappers and pluggy's call monitoring -------------------------------------------------------


class RaisingWrapper:
    """A new-style wrapper that would add retain to every handler's options, and fails."""

    @hookimpl(wrapper=True)
    def kopf_outcomes_handler_options(self, handler_id: str, resource: ResourceRef | None) -> Generator[
            None, list[HandlerOptions], list[HandlerOptions]]:
        result = yield
        raise RuntimeError(f"options store unreachable ({len(result)} answers)")


class WrongWrapper:
    """A new-style wrapper that adds an answer of the wrong type."""

    @hookimpl(wrapper=True)
    def kopf_outcomes_handler_options(self, handler_id: str, resource: ResourceRef | None) -> Generator[
            None, list[object], list[object]]:
        result = yield
        return [*result, {"fatal_on_delete": "retain"}]


@pytest.mark.parametrize("wrapper", [RaisingWrapper, WrongWrapper])
async def test_a_failing_options_wrapper_holds_the_finalizer(
        wrapper: type, server: Aging, tmp_path: Any, unpatched: None) -> None:
    def gone(**_: Any) -> None:
        raise kopf.PermanentError("the backend refuses")
    for _ in installed(tmp_path, "", Flaky(HandlerOptions(), broken=False), wrapper()):
        await server.run(on_delete(gone), count=3)
    assert server.finalized


class RetainWrapper:
    """A well-behaved new-style wrapper: adds retain to every handler's options."""

    @hookimpl(wrapper=True)
    def kopf_outcomes_handler_options(self, handler_id: str, resource: ResourceRef | None) -> Generator[
            None, list[HandlerOptions], list[HandlerOptions]]:
        result = yield
        return [*result, HandlerOptions(fatal_on_delete="retain")]


async def test_control_a_working_wrapper_gives_retain(server: Aging, tmp_path: Any, unpatched: None) -> None:
    def gone(**_: Any) -> None:
        raise kopf.PermanentError("the backend refuses")
    for _ in installed(tmp_path, "", Flaky(HandlerOptions(), broken=False), RetainWrapper()):
        await server.run(on_delete(gone), count=3)
    assert server.finalized


async def test_a_transient_failure_beside_a_working_wrapper_keeps_the_wrappers_options(
        server: Aging, tmp_path: Any, unpatched: None) -> None:
    def gone(**_: Any) -> None:
        raise kopf.PermanentError("the backend refuses")
    for _ in installed(tmp_path, "", FirstCallFails(HandlerOptions()), RetainWrapper()):
        await server.run(on_delete(gone), count=3)
    assert server.finalized


async def test_a_failing_plugin_under_pluggys_call_monitoring_holds(
        server: Aging, tmp_path: Any, unpatched: None, caplog: pytest.LogCaptureFixture) -> None:
    """Guard: the "pluggy's own call first" branch still names and holds a failing plain plugin."""
    def gone(**_: Any) -> None:
        raise kopf.PermanentError("the backend refuses")
    for plugins in installed(tmp_path, 'fatal_on_delete = "retain"\n', FailingOptions()):
        undo = plugins.add_hookcall_monitoring(lambda *_: None, lambda *_: None)
        try:
            await server.run(on_delete(gone), count=3)
        finally:
            undo()
    assert server.finalized
    assert any("failed in kopf_outcomes_handler_options" in e for e in errors_of(caplog))


# --- several handlers, sub-handlers, Fatal, errors= ----------------------------------------------


async def test_several_deletion_handlers_under_a_fault_hold_then_release_once_fixed(
        server: Aging, tmp_path: Any, unpatched: None) -> None:
    """Guard: one succeeds, one fails permanently; held while the plugin is down; once it
    answers (no retain), both conclude and the object is not stranded."""
    registry = kopf.OperatorRegistry()

    def ok(**_: Any) -> None:
        return None

    def gone(**_: Any) -> None:
        raise kopf.PermanentError("the backend refuses")
    kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, id="ok", backoff=0.01)(ok)
    kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, id="gone", backoff=0.01)(gone)
    plugin = Flaky(HandlerOptions())
    for _ in installed(tmp_path, "", plugin):
        await server.run(registry, count=4)
        assert server.finalized
        plugin.broken = False
        await server.run(registry, count=4)
    assert not server.finalized


@pytest.mark.parametrize("on_delete_choice", ["release", "retain", None])
async def test_a_fatal_under_a_fault_holds_whatever_it_chose(
        on_delete_choice: Any, server: Aging, tmp_path: Any, unpatched: None) -> None:
    """Guard: Fatal(on_delete="release") under a fault is held, not released."""
    def fatal(**_: Any) -> Fatal:
        return Fatal("the backend refuses", on_delete=on_delete_choice)
    for _ in installed(tmp_path, "", FailingOptions()):
        await server.run(on_delete(fatal), count=3)
    assert server.finalized


async def test_errors_permanent_under_a_fault_holds(server: Aging, tmp_path: Any, unpatched: None) -> None:
    """Guard: an arbitrary exception under errors=PERMANENT (Kopf's final failure) is held."""
    def boom(**_: Any) -> None:
        raise ValueError("boom")
    for _ in installed(tmp_path, "", FailingOptions()):
        await server.run(on_delete(boom, errors=kopf.ErrorsMode.PERMANENT), count=3)
    assert server.finalized


async def test_a_grandchild_under_a_fault_holds_then_releases_once_fixed(
        server: Aging, tmp_path: Any, unpatched: None) -> None:
    """Guard: sub-handlers two levels deep; the grandchild fails permanently under retain while the
    plugin is down: held; once it answers and the grandchild succeeds, released."""
    failing = [True]

    def grandchild(**_: Any) -> None:
        if failing[0]:
            raise kopf.PermanentError("the backend refuses")

    def child(**_: Any) -> None:
        kopf.register(fn=grandchild, id="grandchild", backoff=0.01)

    def parent(**_: Any) -> None:
        kopf.register(fn=child, id="child", backoff=0.01)
    plugin = Flaky(HandlerOptions())
    for _ in installed(tmp_path, "", plugin):
        await server.run(on_delete(parent), count=5)
        assert server.finalized
        failing[0] = False
        plugin.broken = False
        await server.run(on_delete(parent), count=6)
    assert not server.finalized


class ChildrenFail(Flaky):
    """Answers for top-level handlers; its store for sub-handlers (ids with a "/": a cache miss
    after the parent's options were read and cached) is down."""

    def kopf_outcomes_handler_options(self, handler_id: str, resource: ResourceRef | None) -> HandlerOptions | None:
        if "/" in handler_id and self.broken:
            raise RuntimeError("options store unreachable")
        return self.options
    kopf_outcomes_handler_options = hookimpl(kopf_outcomes_handler_options)


async def test_a_fault_on_a_sub_handlers_options_only_holds_the_parent(
        server: Aging, tmp_path: Any, unpatched: None, caplog: pytest.LogCaptureFixture) -> None:
    """Guard: the parent's options were read well (cached); the child's are a miss that fails; the
    child succeeds but is held, so the parent must not succeed and release; once fixed, released."""
    def child(**_: Any) -> None:
        return None

    def parent(**_: Any) -> None:
        kopf.register(fn=child, id="child", backoff=0.01)
    plugin = ChildrenFail(HandlerOptions())
    for _ in installed(tmp_path, "", plugin):
        await server.run(on_delete(parent), count=5)
        assert server.finalized and any("held:" in e and "/child" in e for e in errors_of(caplog))
        plugin.broken = False
        await server.run(on_delete(parent), count=5)
    assert not server.finalized


# --- wrong field types from a plugin -------------------------------------------------------------


class Options:
    def __init__(self, **fields: Any) -> None:
        self.fields = fields

    @hookimpl
    def kopf_outcomes_handler_options(self, handler_id: str, resource: ResourceRef | None) -> HandlerOptions:
        return HandlerOptions(**self.fields)


async def test_a_plugins_bad_fatal_on_delete_holds(server: Aging, tmp_path: Any, unpatched: None,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """Guard: HandlerOptions(fatal_on_delete="RETAIN") raises inside the plugin: held, named."""
    def gone(**_: Any) -> None:
        raise kopf.PermanentError("the backend refuses")
    for _ in installed(tmp_path, "", Options(fatal_on_delete="RETAIN")):
        await server.run(on_delete(gone), count=3)
    assert server.finalized
    assert any("failed in kopf_outcomes_handler_options" in e for e in errors_of(caplog))


async def test_a_plugins_non_boolean_explicit_completion_does_not_release(
        server: Aging, tmp_path: Any, unpatched: None) -> None:
    def not_done(**_: Any) -> bool:
        return False
    for _ in installed(tmp_path, "", Options(explicit_completion="")):  # True here keeps it (a control below)
        await server.run(on_delete(not_done), count=3)
    assert server.finalized


async def test_control_a_plugins_boolean_explicit_completion_keeps_a_not_done(
        server: Aging, tmp_path: Any, unpatched: None) -> None:
    def not_done(**_: Any) -> bool:
        return False
    for _ in installed(tmp_path, "", Options(explicit_completion=True)):
        await server.run(on_delete(not_done), count=3)
    assert server.finalized


class ForgedOptions:
    """A broken plugin: answers HandlerOptions whose value it changed after the check (a frozen
    dataclass, forced): the answer passes the type check, its value does not."""

    @hookimpl
    def kopf_outcomes_handler_options(self, handler_id: str, resource: ResourceRef | None) -> HandlerOptions:
        options = HandlerOptions()
        object.__setattr__(options, "fatal_on_delete", "RETAIN")
        return options


async def test_a_plugins_options_forged_past_their_check_are_contained_and_hold(
        server: Aging, tmp_path: Any, unpatched: None, caplog: pytest.LogCaptureFixture) -> None:
    """Containment: the merge re-checks the value and raises outside the per-plugin guard. Nothing
    may escape Kopf's processing, and the deletion must be held (the plugin's options are unread)."""
    runs: list[int] = []

    def gone(**_: Any) -> None:
        runs.append(1)
        raise kopf.PermanentError("the backend refuses")
    escaped: list[BaseException] = []
    for _ in installed(tmp_path, "", ForgedOptions()):
        try:
            await server.run(on_delete(gone, retries=3), count=6)
        except ValueError as e:
            escaped.append(e)
    errors = errors_of(caplog)
    assert not escaped and not any("unexpected error" in e for e in errors), (escaped, errors[-1:])
    assert server.finalized and any("ForgedOptions" in e for e in errors), errors[-2:]


# --- kinds that cannot wait ----------------------------------------------------------------------


async def test_an_event_handler_under_a_failing_options_plugin_runs_and_nothing_escapes(
        server: Aging, tmp_path: Any, unpatched: None) -> None:
    """Containment: an on.event handler (no finalizer, cannot wait) still runs; nothing raises."""
    seen: list[int] = []
    registry = kopf.OperatorRegistry()
    kopf.on.event("kopf.dev", "v1", "kopfexamples", registry=registry)(lambda **_: seen.append(1))
    kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, backoff=0.01)(lambda **_: None)
    for _ in installed(tmp_path, "", FailingOptions()):
        await server.run(registry, count=2)
    assert seen and server.finalized


# --- finding 7: afresh --------------------------------------------------------------------------


async def test_a_woken_parent_runs_its_sub_handlers_afresh(
        server: Aging, tmp_path: Any, unpatched: None, caplog: pytest.LogCaptureFixture) -> None:
    """Finding 7, sub-handlers: a finished parent woken by a change is a new run: its child (with
    retries=1, spent by its first run) must run again, not be failed by the old run's count."""
    runs: list[str] = []

    def child(**_: Any) -> None:
        runs.append("child")

    def parent(**_: Any) -> None:
        runs.append("parent")
        kopf.register(fn=child, id="child", retries=1, backoff=0.01)

    def waits(spec: Any, **_: Any) -> Any:
        return True if spec.get("ready") else kopf_outcomes.Pending("waiting for spec.ready")
    registry = kopf.OperatorRegistry()
    kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, id="parent", backoff=0.01)(parent)
    kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, id="waits", backoff=0.01)(waits)
    for _ in installed(tmp_path, 'remember = true\nfatal_on_delete = "retain"\n'):
        await server.run(registry, count=4)
        assert server.finalized and runs.count("child") == 1, runs
        server.body["spec"]["ready"] = True
        await server.run(registry, count=5)
    assert not any("exceeded" in r.getMessage() for r in caplog.records), errors_of(caplog)
    assert runs.count("parent") == 2 and runs.count("child") == 2 and not server.finalized, runs


async def test_a_permanently_failed_remembered_handler_is_not_resurrected_by_a_change(
        server: Aging, tmp_path: Any, unpatched: None) -> None:
    """Guard, finding 7: afresh is for a handler that finished well; one that failed for good
    (released as stock) stays failed when a change wakes its remembered sibling."""
    runs: list[str] = []

    def gone(**_: Any) -> None:
        runs.append("gone")
        raise kopf.PermanentError("the backend refuses")

    def waits(spec: Any, **_: Any) -> Any:
        runs.append("waits")
        return True if spec.get("ready") else kopf_outcomes.Pending("waiting for spec.ready")
    registry = kopf.OperatorRegistry()
    kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, id="gone", backoff=0.01)(gone)
    kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, id="waits", backoff=0.01)(waits)
    for _ in installed(tmp_path, "remember = true\n"):
        await server.run(registry, count=3)
        assert server.finalized and runs.count("gone") == 1, runs
        server.body["spec"]["ready"] = True
        await server.run(registry, count=4)
    assert runs.count("gone") == 1 and not server.finalized, runs


async def test_a_persons_release_of_a_retained_handler_is_not_held_by_a_plugin_down_after_a_restart(
        server: Aging, tmp_path: Any, unpatched: None, caplog: pytest.LogCaptureFixture) -> None:
    """Guard ("a person's release annotation is not held"): retained while the plugin answered;
    after a restart the plugin is down, and a person releases the object."""
    def gone(**_: Any) -> None:
        raise kopf.PermanentError("the backend refuses")
    registry = kopf.OperatorRegistry()
    kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, id="gone", backoff=0.01)(gone)
    for _ in installed(tmp_path, "", Flaky(HandlerOptions(fatal_on_delete="retain"), broken=False)):
        await server.run(registry, count=3)
    assert server.finalized and "retained" in json.dumps(server.body)
    annotations = server.body["metadata"].setdefault("annotations", {})
    annotations["outcomes.kopf.zalando.org/release"] = stamped(annotations, "gone")
    for _ in installed(tmp_path, "", Flaky(HandlerOptions(fatal_on_delete="retain"), broken=True)):
        await server.run(registry, count=4)
    assert not server.finalized, errors_of(caplog)[-2:]


# --- owned_fields ---------------------------------------------------------------------------------


class NoOwnedFields:
    """A plugin with nothing to own: answers None, pluggy's "no answer" (dropped from a hook's results)."""

    @hookimpl
    def kopf_outcomes_owned_fields(self) -> None:
        return None


class RaisingOwnedFields:
    @hookimpl
    def kopf_outcomes_owned_fields(self) -> list[str]:
        raise RuntimeError("owned fields unknown")


class OwnsConditions:
    @hookimpl
    def kopf_outcomes_owned_fields(self) -> list[str]:
        return ["status.conditions"]


def test_an_owned_fields_plugin_answering_none_is_not_a_failure(tmp_path: Any, unpatched: None,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    for plugins in installed(tmp_path, "", NoOwnedFields()):
        assert engine.owned_fields(plugins, logging.getLogger("review")) == ()
    assert not errors_of(caplog), errors_of(caplog)


def test_a_raising_owned_fields_plugin_leaves_the_others_fields(tmp_path: Any, unpatched: None,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """Guard (containment): only the failing plugin's fields are missing, and it is named."""
    for plugins in installed(tmp_path, "", OwnsConditions(), RaisingOwnedFields()):
        assert engine.owned_fields(plugins, logging.getLogger("review")) == (("status", "conditions"),)
    assert any("RaisingOwnedFields" in e and "owned_fields" in e for e in errors_of(caplog)), errors_of(caplog)


# --- unknown objects: uses that bypass the overridden methods ------------------------------------

UNKNOWN_USES: dict[str, Callable[[Any], object]] = {
    "json.dumps": json.dumps,  # C code that could take a tuple's items without __iter__: it does not
    "str.join": ", ".join,
    "set()": set,
    "sorted()": sorted,
    "any()": any,
}


@pytest.mark.parametrize("use", UNKNOWN_USES)
async def test_unknown_objects_raise_in_c_code_and_builtins_too(
        use: str, objects_installed: PluginManager, logger: logging.Logger) -> None:  # noqa: F811
    source = kopf_outcomes.owned("v1", "configmaps")
    seen: list[object] = []

    @kopf_outcomes.depends_on_objects(source, registry=kopf.OperatorRegistry())
    async def fn(**_: Any) -> None:
        try:
            seen.append(UNKNOWN_USES[use](kopf_outcomes.recall().objects))
        except kopf_outcomes.ObjectsUnknownError as e:
            seen.append(e)

    h = handler_of("timer", fn)
    cause = cause_of("timer", BODY, logger)
    cause.indices = index_of(source, CHILD)
    await run_handlers([h], cause)
    assert isinstance(seen[0], kopf_outcomes.ObjectsUnknownError), f"{use} answered {seen[0]!r}"


async def test_a_held_sub_handler_spends_none_of_its_parents_retries(
        server: Aging, tmp_path: Any, unpatched: None, caplog: pytest.LogCaptureFixture) -> None:
    """Kopf counts a parent's run as a retry while a child is unfinished: a child held (its options
    unread) must not let the parent's ``retries=`` run out, fail it and release the finalizer."""
    def child(**_: Any) -> None:
        return None

    def parent(**_: Any) -> None:
        kopf.register(fn=child, id="child", backoff=0.01)
    plugin = ChildrenFail(HandlerOptions())
    for _ in installed(tmp_path, "", plugin):
        await server.run(on_delete(parent, retries=2), count=5)
        assert server.finalized, errors_of(caplog)[-2:]
        plugin.broken = False
        await server.run(on_delete(parent, retries=2), count=5)
    assert not server.finalized and not any("exceeded" in e for e in errors_of(caplog)), errors_of(caplog)[-2:]
