"""
Shards by label on the real API server (examples/deploy/shards/operator.py, two processes): an
object relabelled to another shard while its deletion waits. Stock Kopf releases its finalizer
("no handlers requiring it"); with kopf-outcomes the shard it leaves keeps it, writes nothing, and
the shard it joins continues from the memory: one start, one key, woken by the callback.
"""
from __future__ import annotations

import asyncio
import inspect
import os
import re
import subprocess
import time

import pytest
from kopf import OperatorSettings
from kopf._cogs.structs import finalizers

from tests.docs.blocks import ROOT, blocks
from tests.e2e.conftest import eventually, get_example
from tests.e2e.test_kinds import patch_status
from tests.e2e.test_memory import patch
from tests.e2e.test_outcomes import FINALIZER

RECIPE = "examples/deploy/shards/operator.py"
STOCK = "tests/e2e/operators/stock_shard_operator.py"
LABEL = "kopf-outcomes.example.com/shard"
# The how-to's command that moves an object to shard b (docs/howto/shard.md), run as written.
MOVE = next(b.code.strip() for b in blocks(ROOT / "docs" / "howto" / "shard.md")
            if b.language == "sh" and "tested" in b.flags and "kubectl label" in b.code)
KEY = re.compile(r"Asked the external system to delete its side \(key (\w+)\)\.")


async def deleting_on(objects, namespace: str, name: str, shard: str, *, delete: bool = True) -> None:
    await objects.create_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", {
        "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
        "metadata": {"name": name, "labels": {LABEL: shard}}, "spec": {}})
    await eventually(lambda: _has_finalizer(objects, namespace, name), what="the finalizer")
    if delete:
        await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", name)


async def _has_finalizer(objects, namespace: str, name: str) -> bool:
    body = await get_example(objects, namespace, name)
    return FINALIZER in ((body or {}).get("metadata", {}).get("finalizers") or [])


async def _gone(objects, namespace: str, name: str) -> bool:
    return await get_example(objects, namespace, name) is None


def keys(op) -> list[str]:
    return [m.group(1) for r in op.records() if (m := KEY.fullmatch(r.message))]


def writes(op) -> int:
    return sum(1 for r in op.records() if r.message.startswith(("Merge-patching the resource", "JSON-patching")))


def runs(op) -> int:
    return sum(1 for r in op.records() if r.message == "Handler 'delete_fn' is invoked.")


async def test_stock_kopf_releases_the_finalizer_of_an_object_relabelled_to_another_shard(
        objects, namespace, operator):
    async with operator(STOCK, SHARD="a") as a:
        await deleting_on(objects, namespace, "moved", "a")
        await a.wait_for(lambda r: r.message == "Asked the external system to delete its side.", what="the start")
        await patch(objects, namespace, "moved", {"metadata": {"labels": {LABEL: "b"}}})
        # Nobody called back; the handler waits 30 s for its retry, yet the object goes at once.
        await eventually(lambda: _gone(objects, namespace, "moved"), timeout=10, what="stock's release")
        assert any(r.message == "Removing the finalizer, as there are no handlers requiring it." for r in a.records())


async def test_stock_kopf_shards_by_label_that_share_the_finalizer_fight_over_it(objects, namespace, operator):
    async with operator(STOCK, SHARD="a") as a, operator(STOCK, SHARD="b") as b:
        await deleting_on(objects, namespace, "fought", "a", delete=False)
        await asyncio.sleep(2)
        adds = sum(1 for r in a.records() if r.message == "Adding the finalizer, thus preventing the actual deletion.")
        removals = sum(1 for r in b.records()
                       if r.message == "Removing the finalizer, as there are no handlers requiring it.")
        assert adds >= 3 and removals >= 3, (adds, removals)  # Kopf issue 664: without end


def move_as_the_howto_says(cluster, namespace: str, name: str) -> None:
    env = dict(os.environ, KUBECONFIG=str(cluster.admin_kubeconfig), NAMESPACE=namespace, NAME=name)
    done = subprocess.run(MOVE, shell=True, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


SERVER_SELECTS = hasattr(OperatorSettings().watching, "label_selectors")  # Kopf 1.45 and later


@pytest.mark.parametrize("selection", [
    "client",
    pytest.param("server", marks=pytest.mark.skipif(
        not SERVER_SELECTS, reason="Kopf < 1.45 has no server-side label selectors: every shard filters every object")),
])
async def test_a_waiting_object_moved_to_another_shard_is_kept_and_continued_there_with_one_key(
        objects, namespace, operator, cluster, selection):
    """Rechecks every 2 s: the shard the object leaves drops its own (it runs nothing after the
    move), the shard it joins takes them over from the memory, quietly (no write, no new start).
    Selected by the API server, the shard it leaves is told that the object was deleted (it no
    longer matches the watch's selector), and the shard it joins that it was added."""
    async with operator(RECIPE, SHARD="a", RECHECK_SECONDS="2", SHARD_SELECTION=selection) as a, \
            operator(RECIPE, SHARD="b", RECHECK_SECONDS="2", SHARD_SELECTION=selection) as b:
        await deleting_on(objects, namespace, "moved", "a")
        await eventually(lambda: asyncio.sleep(0, keys(a)), what="shard a to start the external deletion")
        await eventually(lambda: asyncio.sleep(0, runs(a) >= 2), what="shard a's first recheck")
        assert writes(b) == 0, "shard b wrote to shard a's object"

        moved = time.time()
        move_as_the_howto_says(cluster, namespace, "moved")
        await asyncio.sleep(0.5)  # the move's event reaches both shards
        runs_on_a, writes_on_a, writes_on_b = runs(a), writes(a), writes(b)
        await eventually(lambda: asyncio.sleep(0, runs(b) >= 2), timeout=10, what="shard b's rechecks")
        assert await _has_finalizer(objects, namespace, "moved")
        assert runs(a) == runs_on_a, "shard a ran the handler after the object left it"
        assert (writes(a), writes(b)) == (writes_on_a, writes_on_b), "a shard wrote while the object waited"
        assert keys(b) == [], "shard b started the external deletion again"

        await patch_status(objects, namespace, "moved", {"status": {"deletion": {"state": "done"}}})
        await eventually(lambda: _gone(objects, namespace, "moved"), timeout=10, what="the object to go")
        assert any(r.message == "Handler 'delete_fn' succeeded." for r in b.records())
        assert runs(a) == runs_on_a
        assert len(keys(a)) == 1 and keys(b) == []
        if selection == "server":  # each shard saw its own objects only: b none before the move; a was told "gone"
            assert not any(r.time < moved for r in b.records(f"{namespace}/moved"))
            assert any(r.message == "Deleted, really deleted, and we are notified." and r.time >= moved
                       for r in a.records(f"{namespace}/moved"))


@pytest.mark.skipif("patch" in inspect.signature(finalizers.allow_deletion).parameters,
                    reason="Kopf < 1.38 releases it as stock Kopf does: a known limit (kopf_outcomes/_kopf/held.py)")
async def test_a_waiting_object_moved_out_of_the_only_operators_filter_is_kept_until_a_person_releases_it(
        objects, namespace, operator):
    async with operator("tests/e2e/operators/filtered_operator.py") as op:
        await objects.create_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", {
            "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
            "metadata": {"name": "left", "labels": {"served": "yes"}}, "spec": {}})
        await eventually(lambda: _has_finalizer(objects, namespace, "left"), what="the finalizer")
        await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", "left")
        await op.wait_for(lambda r: r.message.startswith("Handler 'delete_fn' is pending"), what="Pending")

        await patch(objects, namespace, "left", {"metadata": {"labels": {"served": "no"}}})
        error = await op.wait_for(lambda r: r.level == "ERROR" and r.message.startswith("Kept the finalizer"),
                                  what="the ERROR that says why the finalizer stays")
        assert "delete_fn" in error.message and "outcomes.kopf.zalando.org/release=delete_fn" in error.message
        await patch(objects, namespace, "left", {"metadata": {"labels": {"unrelated": "change"}}})
        await asyncio.sleep(1.5)
        assert await _has_finalizer(objects, namespace, "left")
        assert sum(1 for r in op.records() if r.message.startswith("Kept the finalizer")) == 1  # said once

        await patch(objects, namespace, "left", {"metadata": {"annotations": {
            "outcomes.kopf.zalando.org/release": "delete_fn"}}})
        await eventually(lambda: _gone(objects, namespace, "left"), timeout=10, what="the person's release")


async def test_a_waiting_object_whose_namespace_moves_to_another_shard_is_continued_there_with_one_key(
        objects, namespace, operator):
    """Shards by namespace: the namespace leaves shard a's patterns (its rollout ends the process),
    then joins shard b's; b lists the object and continues from its memory."""
    async with operator(RECIPE) as a:
        await deleting_on(objects, namespace, "handed-over", "any")
        await eventually(lambda: asyncio.sleep(0, keys(a)), what="shard a to start the external deletion")
        await eventually(lambda: _memory_written(objects, namespace, "handed-over"), what="the memory")
    async with operator(RECIPE) as b:
        await b.wait_for(lambda r: r.message.startswith("Deletion is in progress"), what="shard b to list it")
        await asyncio.sleep(1)
        assert await _has_finalizer(objects, namespace, "handed-over")
        called = time.monotonic()
        await patch_status(objects, namespace, "handed-over", {"status": {"deletion": {"state": "done"}}})
        await eventually(lambda: _gone(objects, namespace, "handed-over"), timeout=10, what="the object to go")
        assert time.monotonic() - called < 5
    assert len(keys(a)) == 1 and keys(b) == [], "shard b started the external deletion again"


async def _memory_written(objects, namespace: str, name: str) -> bool:
    body = await get_example(objects, namespace, name)
    return "outcomes.kopf.zalando.org/memory" in ((body or {}).get("metadata", {}).get("annotations") or {})
