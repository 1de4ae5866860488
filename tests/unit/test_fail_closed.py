"""
Fail closed (issue 41): where something a deletion's release depends on failed in a cycle, the
finalizer is kept and the handler runs again; a failing plugin's answer is left out, and only its
own. Each history goes through Kopf's own event processing (``process_resource_event``) against a
one-object fake API server, which applies Kopf's patches: what is asserted is the object's finalizer.
"""
from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Iterator
from typing import Any

import kopf
import pytest
from kopf._cogs.clients import api
from kopf._cogs.configs import configuration
from kopf._cogs.structs import ephemera, references
from kopf._core.reactor import inventory, processing

import kopf_outcomes
from kopf_outcomes import Fatal, HandlerOptions, ResourceRef, finalizer, handler_options, hookimpl
from kopf_outcomes.manager import PluginManager
from tests.unit.kopf_objects import NO_THROTTLING, merged

FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
RESOURCE = references.Resource("kopf.dev", "v1", "kopfexamples", namespaced=True)


class FailingOptions:
    """An options plugin that raises on every call."""

    @hookimpl
    def kopf_outcomes_handler_options(self, handler_id: str, resource: ResourceRef | None) -> HandlerOptions | None:
        raise RuntimeError("options store unreachable")


class WrongOptions:
    """An options plugin that answers with something other than HandlerOptions."""

    @hookimpl
    def kopf_outcomes_handler_options(self, handler_id: str, resource: ResourceRef | None) -> object:
        return {"remember": True}


class Server:
    """One object, as the API server keeps it: Kopf's patches applied, each answered with the object."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        meta = {"name": "x", "namespace": "ns", "uid": "u1", "resourceVersion": "1", "finalizers": [FINALIZER],
                "deletionTimestamp": "2026-12-04T00:00:00Z", "generation": 1}
        self.body: dict[str, Any] = {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": meta,
                                     "spec": {}}
        self.version = 1
        monkeypatch.setattr(api, "patch", self.patch)

    async def patch(self, *, payload: Any, **_: Any) -> dict[str, Any]:
        if isinstance(payload, list):  # Kopf >= 1.38: a JSON patch
            import jsonpatch
            self.body = jsonpatch.apply_patch(self.body, payload)
        else:
            self.body = merged(self.body, payload)
        self.version += 1
        self.body["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.body)

    @property
    def finalized(self) -> bool:
        """Whether the finalizer is still there."""
        return FINALIZER in (self.body["metadata"].get("finalizers") or [])

    async def cycles(self, registry: kopf.OperatorRegistry, count: int = 3,
                     lifecycle: Any = kopf.lifecycles.all_at_once) -> None:
        """Kopf's processing of the object's events, each of the object as the last patch left it."""
        settings = configuration.OperatorSettings()
        memories = inventory.ResourceMemories()
        for _ in range(count):
            if not self.finalized:
                return
            event = {"type": "MODIFIED", "object": copy.deepcopy(self.body)}
            await processing.process_resource_event(
                lifecycle=lifecycle, indexers=processing.indexing.OperatorIndexers(),
                registry=registry, settings=settings, memories=memories, memobase=ephemera.Memo(),
                resource=RESOURCE, raw_event=event, event_queue=asyncio.Queue(),  # type: ignore[arg-type]
                **NO_THROTTLING)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Server:
    return Server(monkeypatch)


def installed(tmp_path: Any, policy: str, *plugins: object) -> Iterator[PluginManager]:
    path = tmp_path / "policy.toml"
    path.write_text(policy)
    manager = kopf_outcomes.install(entry_points=False, events=False, policy=path, plugins=plugins)
    try:
        yield manager
    finally:
        kopf_outcomes.uninstall()


def on_delete(fn: Callable[..., Any], **options: Any) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, backoff=0.01, **options)(fn)
    return registry


@pytest.mark.parametrize("plugin", [FailingOptions, WrongOptions])
async def test_a_failing_options_plugin_keeps_the_finalizer_under_explicit_completion(
        plugin: type, server: Server, tmp_path: Any, unpatched: None, caplog: pytest.LogCaptureFixture) -> None:
    """Finding 1: the plugin's failure dropped the policy's options too; "not done" read as done."""
    runs: list[int] = []

    def not_done(**_: Any) -> bool:
        runs.append(1)
        return False
    for _ in installed(tmp_path, "explicit_completion = true\n", plugin()):
        await server.cycles(on_delete(not_done))
    assert server.finalized and runs
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert any("failed in kopf_outcomes_handler_options" in e and "DISABLE_PLUGINS" in e for e in errors), errors


@pytest.mark.parametrize("plugin", [FailingOptions, WrongOptions])
async def test_a_failing_options_plugin_keeps_the_finalizer_under_retain(
        plugin: type, server: Server, tmp_path: Any, unpatched: None) -> None:
    """Finding 1: with the policy's fatal_on_delete dropped, a PermanentError released."""
    def gone(**_: Any) -> None:
        raise kopf.PermanentError("the backend refuses")
    for _ in installed(tmp_path, 'fatal_on_delete = "retain"\n', plugin()):
        await server.cycles(on_delete(gone))
    assert server.finalized


async def test_a_failing_options_plugin_holds_even_a_deletion_that_succeeds(
        server: Server, tmp_path: Any, unpatched: None) -> None:
    """What the options would have said is unknown: a success could be "not done" under them."""
    for _ in installed(tmp_path, "", FailingOptions()):
        await server.cycles(on_delete(lambda **_: None))
    assert server.finalized


async def test_the_policys_options_stand_beside_a_failing_plugin(tmp_path: Any, unpatched: None) -> None:
    """Only the failing plugin's answer is left out, never the policy's or another plugin's."""
    for plugins in installed(tmp_path, 'fatal_on_delete = "retain"\nexplicit_completion = true\n',
                             FailingOptions()):
        options = plugins.options("h", None)
        assert options.fatal_on_delete == "retain" and options.explicit_completion is True


async def test_without_the_failing_plugin_the_deletion_is_released(server: Server, tmp_path: Any,
                                                                   unpatched: None) -> None:
    """The control: the same history with a well-behaved installation releases."""
    for _ in installed(tmp_path, "explicit_completion = true\n"):
        await server.cycles(on_delete(lambda **_: True))
    assert not server.finalized


@pytest.mark.parametrize("bad", ["keep", "", "RETAIN", None.__class__])
@pytest.mark.parametrize("source", ["decorator", "policy"])
async def test_a_bad_on_delete_set_after_the_fatal_was_made_keeps_the_finalizer(
        bad: object, source: str, server: Server, tmp_path: Any, unpatched: None,
        caplog: pytest.LogCaptureFixture) -> None:
    """Finding 6: ``(on_delete or option) == "retain"`` read a bad value as "release"."""
    def fatal(**_: Any) -> Fatal:
        outcome = Fatal("the backend refuses")
        outcome.on_delete = bad  # type: ignore[assignment]
        return outcome
    fn = handler_options(fatal_on_delete="retain")(fatal) if source == "decorator" else fatal
    policy = 'fatal_on_delete = "retain"\n' if source == "policy" else ""
    for _ in installed(tmp_path, policy):
        await server.cycles(on_delete(fn))
    assert server.finalized
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert any(f"Fatal(on_delete=...) is {bad!r}" in e for e in errors), errors


async def test_a_bad_on_delete_in_a_sub_handler_keeps_the_parent_from_succeeding(
        server: Server, tmp_path: Any, unpatched: None) -> None:
    """Finding 6, sub-handlers: the child's bad value must not let its parent succeed."""
    def child(**_: Any) -> Fatal:
        outcome = Fatal("the backend refuses")
        outcome.on_delete = "keep"  # type: ignore[assignment]
        return outcome

    def parent(**_: Any) -> None:
        kopf.register(fn=child, id="child", backoff=0.01)
    for _ in installed(tmp_path, 'fatal_on_delete = "retain"\n'):
        await server.cycles(on_delete(parent), count=4)
    assert server.finalized


@pytest.mark.parametrize("lifecycle", [kopf.lifecycles.all_at_once, kopf.lifecycles.one_by_one])
async def test_a_remembered_handler_woken_after_it_finished_runs_afresh_under_retries(
        lifecycle: Any, server: Server, tmp_path: Any, unpatched: None, caplog: pytest.LogCaptureFixture) -> None:
    """Finding 7: woken by a change after it finished, a handler with ``retries=1`` was failed by
    Kopf's pre-run check ("exceeded 1 retries") without running, and retained, all handlers done."""
    runs: list[str] = []

    def cleanup(**_: Any) -> None:
        runs.append("cleanup")

    def waits(spec: Any, **_: Any) -> Any:
        runs.append("waits")
        return True if spec.get("ready") else kopf_outcomes.Pending("waiting for spec.ready")
    registry = kopf.OperatorRegistry()
    kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, id="cleanup", retries=1,
                   backoff=0.01)(cleanup)
    kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, id="waits", backoff=0.01)(waits)
    for _ in installed(tmp_path, 'remember = true\nfatal_on_delete = "retain"\n'):
        await server.cycles(registry, count=3, lifecycle=lifecycle)
        assert server.finalized and runs == ["cleanup", "waits"]
        server.body["spec"]["ready"] = True  # a person's change: wakes both
        await server.cycles(registry, count=4, lifecycle=lifecycle)
    assert not any("exceeded" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert runs.count("cleanup") == 2 and not server.finalized


@pytest.mark.parametrize("bad", ["keep", "", "Retain", 1])
def test_the_rule_that_plugins_ask_never_reads_a_bad_choice_as_release(bad: object) -> None:
    """Plugins (conditions, Prometheus) ask ``retains`` what a Fatal does: a bad value keeps it."""
    assert finalizer.retains("change", "delete", bad, HandlerOptions()) is True  # type: ignore[arg-type]
    assert finalizer.fault("change", "delete", HandlerOptions(), bad) is not None
    assert finalizer.fault("change", "update", HandlerOptions(), bad) is None  # nothing to release there


async def test_a_failing_options_plugin_holds_a_deletions_sub_handler_and_its_parent(
        server: Server, tmp_path: Any, unpatched: None) -> None:
    """Finding 1, sub-handlers: a child's PermanentError under retain must not let its parent succeed."""
    def child(**_: Any) -> None:
        raise kopf.PermanentError("the backend refuses")

    def parent(**_: Any) -> None:
        kopf.register(fn=child, id="child", backoff=0.01)
    for _ in installed(tmp_path, 'fatal_on_delete = "retain"\n', FailingOptions()):
        await server.cycles(on_delete(parent), count=4)
    assert server.finalized
