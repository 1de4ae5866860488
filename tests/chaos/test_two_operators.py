"""
Scenario 5: two operators with kopf-outcomes on one resource, with equal handler ids, differing in
their finalizer and storages: each starts its own side effect once per object and releases only
its own finalizer, whatever the order of the callbacks (and, in the full run, across a SIGKILL each).
"""
from __future__ import annotations

import asyncio
import random

import pytest

from kopf_outcomes.memory import MEMORY_ANNOTATION, keys_for
from tests.chaos.external import ExternalSystem
from tests.chaos.helpers import (
    DEFAULT_FINALIZER,
    QUICK,
    create,
    delete,
    seed,
    starts_figures,
    wait_finalized,
    wait_until,
)
from tests.chaos.operators.other_names import FINALIZER as OTHER_FINALIZER
from tests.chaos.supervisor import Operators

FILES = {"main": "tests/chaos/operators/sidefx.py", "other": "tests/chaos/operators/sidefx_other.py"}
FINALIZERS = {"main": DEFAULT_FINALIZER, "other": OTHER_FINALIZER}


@pytest.mark.parametrize("scope", ["own", "default"])
async def test_two_operators_on_one_resource(objects, namespace, operator, report, scope):
    """``own``: each handler depends on its own callback field; ``default``: the README's idiom,
    where the other operator's callback is a change of the object's state like any other."""
    report.scenario = f"two-operators-{scope}" + ("-quick" if QUICK else "")
    report.seed = seed()
    rng = random.Random(report.seed)
    count = 6 if QUICK else 20
    names = [f"t{i}" for i in range(count)]
    report.objects = count
    system = ExternalSystem()
    async with system as url:
        ops = {op: Operators(lambda op=op: operator(FILES[op], EXTERNAL_SYSTEM_URL=url, CHAOS_OPERATOR=op,
                                                    CHAOS_DEPENDS_ON=scope)) for op in FILES}
        try:
            for each in ops.values():
                await each.start()
            await create(objects, namespace, names)
            for op in FILES:
                assert await wait_finalized(objects, namespace, names, FINALIZERS[op]), f"no {op} finalizers"
            await delete(objects, namespace, names)
            assert await wait_until(lambda: all(system.started(n, op) for n in names for op in FILES), timeout=60)
            if not QUICK:
                for each in ops.values():  # a SIGKILL each while all objects wait, and a restart
                    each.kill()
                    await each.start()
            await asyncio.sleep(1)
            body = await objects.get_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", names[0])
            annotations = body["metadata"].get("annotations") or {}
            report.extra["memory_keys_on_an_object"] = sorted(k for k in annotations if k.startswith(MEMORY_ANNOTATION))
            callbacks = [(op, name) for op in FILES for name in names]
            rng.shuffle(callbacks)
            for op, name in callbacks:
                for held in FILES:
                    await report.check_held(objects, namespace, names, held, FINALIZERS[held])
                await report.call_back(objects, namespace, name, op, FINALIZERS[op])
                await asyncio.sleep(rng.uniform(0, 0.3))
            await report.settle(objects, namespace, names)
            for each in ops.values():
                each.check()
        finally:
            for each in ops.values():
                each.stop()
    for op, each in ops.items():
        report.operator_exits.extend(each.unexpected_exits)
        report.evidence(each, namespace)
        starts_figures(report, system, names, op)
    report.extra["early_releases_per_finalizer"] = {
        FINALIZERS[op]: sum(e.startswith(f"{op}/") for e in report.early_releases) for op in FILES}
    report.write()

    assert report.extra["memory_keys_on_an_object"] == sorted({keys_for(f).memory for f in FINALIZERS.values()})
    assert report.early_releases == []
    assert report.stuck == []
    assert report.operator_exits == []
    for op in FILES:
        if scope == "own":
            assert report.extra[f"objects_not_started_exactly_once_by_key_{op}"] == []
        else:  # the other operator's callback is a new state of the object: one start per state
            keys = report.extra[f"keys_per_object_{op}"]
            assert all(1 <= count <= 2 for count in keys.values()), keys
