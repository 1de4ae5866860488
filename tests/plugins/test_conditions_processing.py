"""The conditions plugin through Kopf's real processing (``process_resource_event``), with Kopf's
PATCH answered by the object as patched: another tool's shape of ``status.conditions`` never fails
a handler (issue 41, finding 5), and the summary is True only when every handler of the cause has
concluded (issue 44, finding 6)."""
from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Iterator
from typing import Any

import jsonpatch
import kopf
import kopf_outcomes_conditions
import pytest
from kopf._cogs.clients import api
from kopf._cogs.configs import configuration
from kopf._cogs.structs import ephemera, references
from kopf._core.reactor import inventory, processing
from kopf_outcomes_conditions import foreign

import kopf_outcomes
from tests.unit.kopf_objects import merged

FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
RESOURCE = references.Resource("kopf.dev", "v1", "kopfexamples", namespaced=True)


class Server:
    """One object, as Kopf's PATCH requests leave it."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.patches: list[Any] = []

    async def patch(self, *, payload: Any, **_: Any) -> dict[str, Any]:
        self.patches.append(payload)
        if isinstance(payload, list):  # a JSON patch (Kopf >= 1.38), its resourceVersion test included
            self.body = jsonpatch.apply_patch(self.body, [op for op in payload if op["op"] != "test"])
        else:
            self.body = merged(self.body, payload)
        self.body["metadata"]["resourceVersion"] = str(int(self.body["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(self.body)

    def conditions(self) -> dict[str, dict[str, Any]]:
        found = (self.body.get("status") or {}).get("conditions") or []
        return {c["type"]: c for c in found if isinstance(c, dict)}


@pytest.fixture
def installed() -> Iterator[None]:
    kopf_outcomes.install(plugins=[kopf_outcomes_conditions], entry_points=False, events=False)
    foreign._warned.clear()  # once per object: each test's object is new
    yield
    kopf_outcomes.uninstall()


def _object(*, deleting: bool = False, status: dict[str, Any] | None = None, generation: int = 1) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "x", "namespace": "ns", "uid": "u-conditions", "resourceVersion": "1",
                            "generation": generation, "finalizers": [FINALIZER]}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-04T00:00:00Z"
    return {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": meta, "spec": {},
            **({"status": status} if status is not None else {})}


async def _cycle(server: Server, registry: kopf.OperatorRegistry, monkeypatch: pytest.MonkeyPatch,
                 lifecycle: Any = kopf.lifecycles.asap) -> None:
    monkeypatch.setattr(api, "patch", server.patch)
    await processing.process_resource_event(
        lifecycle=lifecycle, indexers=processing.indexing.OperatorIndexers(),
        registry=registry, settings=configuration.OperatorSettings(), memories=inventory.ResourceMemories(),
        memobase=ephemera.Memo(), resource=RESOURCE, event_queue=asyncio.Queue(), no_throttling=True,
        raw_event={"type": "MODIFIED", "object": copy.deepcopy(server.body)})  # type: ignore[arg-type]


@pytest.mark.parametrize("conditions", [["Ready"], {"Ready": {"status": "True"}}, "Ready",
                                        [{"type": "Ready", "status": "True"}, 7, None]],
                         ids=["a-list-of-strings", "a-map", "a-string", "mixed"])
async def test_a_deletion_handler_succeeds_and_releases_despite_a_foreign_shape_of_conditions(
        installed: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, conditions: Any) -> None:
    """Issue 41, finding 5: the plugin raised on ``["Ready"]`` or a map, and every run became a
    plugin-failure retry that never ended; the finalizer was never released."""
    registry = kopf.OperatorRegistry()
    ran: list[str] = []
    kopf.on.delete("kopf.dev", "v1", "kopfexamples", registry=registry, id="delete_fn")(
        lambda **_: ran.append("delete_fn"))
    server = Server(_object(deleting=True, status={"conditions": conditions}))
    with caplog.at_level(logging.WARNING):
        await _cycle(server, registry, monkeypatch)
        await _cycle(server, registry, monkeypatch)  # a second run of the plugin warns no more
    assert ran == ["delete_fn"]
    assert FINALIZER not in (server.body["metadata"].get("finalizers") or [])
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    warnings = [r.getMessage() for r in caplog.records if r.name == "kopf_outcomes.conditions"]
    assert len(warnings) == 1 and warnings[0].startswith("The conditions plugin ignores what it cannot read on ns/x")
    kept = server.body["status"]["conditions"]
    if isinstance(conditions, list):  # its entries kept where they were, ours added after them
        assert kept[:len(conditions)] == conditions and server.conditions()["DeleteFnSucceeded"]["status"] == "True"
    else:
        assert kept == conditions  # another tool's field, left as it is


async def test_the_summary_is_not_true_before_the_second_of_two_create_handlers_ran(
        installed: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 44, finding 6: Kopf runs one handler per cycle; the summary turned True after the first."""
    registry = kopf.OperatorRegistry()
    for handler_id in ("create_a", "create_b"):
        kopf.on.create("kopf.dev", "v1", "kopfexamples", registry=registry, id=handler_id)(lambda **_: None)
    server = Server(_object())
    del server.body["metadata"]["finalizers"]
    await _cycle(server, registry, monkeypatch)
    first = server.conditions()
    assert first["CreateASucceeded"]["status"] == "True" and "CreateBSucceeded" not in first
    summary = first["HandlersSucceeded"]
    assert (summary["status"], summary["reason"]) == ("False", "Waiting")
    assert summary["message"] == ("Waiting for 1 handler(s): CreateB. CreateBSucceeded: "
                                  "not concluded in this cause yet.")
    await _cycle(server, registry, monkeypatch)
    summary = server.conditions()["HandlersSucceeded"]
    assert (summary["status"], summary["observedGeneration"]) == ("True", 1)


async def test_all_at_once_the_summary_is_true_in_the_cycle_where_both_concluded(
        installed: None, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = kopf.OperatorRegistry()
    for handler_id in ("create_a", "create_b"):
        kopf.on.create("kopf.dev", "v1", "kopfexamples", registry=registry, id=handler_id)(lambda **_: None)
    server = Server(_object())
    del server.body["metadata"]["finalizers"]
    await _cycle(server, registry, monkeypatch, lifecycle=kopf.lifecycles.all_at_once)
    assert server.conditions()["HandlersSucceeded"]["status"] == "True"


async def test_the_summary_takes_the_oldest_generation_its_cause_s_handlers_saw(
        installed: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 44, finding 6: the summary took the current generation while another handler of the
    cause had concluded at an older one (``kubectl wait`` compares it with metadata.generation)."""
    registry = kopf.OperatorRegistry()
    for handler_id in ("create_a", "create_b"):
        kopf.on.create("kopf.dev", "v1", "kopfexamples", registry=registry, id=handler_id)(lambda **_: None)
    server = Server(_object())
    del server.body["metadata"]["finalizers"]
    await _cycle(server, registry, monkeypatch)  # create_a at generation 1
    server.body["metadata"]["generation"] = 2
    await _cycle(server, registry, monkeypatch)  # create_b at generation 2
    written = server.conditions()
    assert written["CreateBSucceeded"]["observedGeneration"] == 2
    assert (written["HandlersSucceeded"]["status"], written["HandlersSucceeded"]["observedGeneration"]) == ("True", 1)


async def test_a_parents_sub_handlers_do_not_make_the_summary_true_before_the_parent_concluded(
        installed: None, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = kopf.OperatorRegistry()

    @kopf.on.create("kopf.dev", "v1", "kopfexamples", registry=registry, id="parent")
    def parent(**_: Any) -> None:
        for item in ("one", "two"):
            @kopf.subhandler(id=item)
            def child(**_: Any) -> None:
                pass

    server = Server(_object())
    del server.body["metadata"]["finalizers"]
    summaries = []
    for _ in range(4):
        await _cycle(server, registry, monkeypatch)
        summaries.append(server.conditions()["HandlersSucceeded"]["status"])
        if "ParentSucceeded" in server.conditions():
            break
    assert summaries[-1] == "True" and set(summaries[:-1]) == {"False"}
    assert {"ParentOneSucceeded", "ParentTwoSucceeded", "ParentSucceeded"} <= set(server.conditions())
