"""
Scenario 4: a plugin that fails in every hook and every way (exceptions, SystemExit,
KeyboardInterrupt, CancelledError, an observer that empties ``metadata.finalizers`` in the patch,
a hook that blocks the loop), and ``errors=`` IGNORED/PERMANENT handlers with a failing
``owned_fields``: no early release, no exit or hang, nothing stuck.
"""
from __future__ import annotations

import json
import random
import re
import time

from tests.chaos.external import ExternalSystem
from tests.chaos.helpers import (
    DEFAULT_FINALIZER,
    QUICK,
    create,
    delete,
    present,
    seed,
    starts_figures,
    wait_finalized,
    wait_until,
)
from tests.chaos.supervisor import Operators

OPERATOR = "tests/chaos/operators/faulty.py"
RUN_HOOKS = ("classify_result", "classify_exception", "adjust_outcome", "observe_outcome")
KINDS = ("RuntimeError", "SystemExit", "KeyboardInterrupt", "CancelledError")


async def test_plugin_faults(objects, namespace, operator, report):
    report.scenario, report.seed = "plugin-faults" + ("-quick" if QUICK else ""), seed()
    rng = random.Random(report.seed)
    system = ExternalSystem()
    all_names: list[str] = []
    figures: dict[str, object] = {"start_failures": [], "slow_hook_warnings": 0, "plugin_failures_logged": 0,
                                  "plugin_failures_not_naming_it": 0}
    async with system as url:
        def make(**env: str) -> Operators:
            return Operators(lambda: operator(OPERATOR, EXTERNAL_SYSTEM_URL=url, CHAOS_SEED=str(report.seed), **env))

        async def run(ops: Operators, labels: dict[str, dict[str, str]], what: str, held: bool = False) -> None:
            """Start, delete the objects mid-way, call back, settle; restart on exits (counted).
            ``held``: a fault that the release depends on (options a plugin could not give) holds
            the deletions past their callbacks (fail closed); an operator without it then releases."""
            names = list(labels)
            all_names.extend(names)
            try:
                try:
                    await ops.start()
                except AssertionError:
                    figures["start_failures"].append(what)  # an exit or a hang at login
                    ops.check()
                    return
                for name, label in labels.items():
                    await create(objects, namespace, [name], label)
                assert await wait_finalized(objects, namespace, names), f"{what}: finalizers were not added"
                await delete(objects, namespace, names)
                for name in names:
                    await wait_until(lambda n=name: _up_and(ops, system.started(n)), timeout=30)
                await ops.ensure_up()
                await report.check_held(objects, namespace, names)
                for name in names:
                    await report.call_back(objects, namespace, name)
                await wait_until(lambda: _up_and(ops, True), timeout=1)
                if held:
                    await _still_held(objects, namespace, names, ops, report)
                    ops.stop()
                    ops.make = make().make  # the plugin fixed: the same objects, released as called back
                    await ops.start()
                await report.settle(objects, namespace, names)
                ops.check()
            finally:
                ops.stop()
                text = ops.text()
                failures = re.findall(r"plugin '([^']*)' failed", text)
                figures["plugin_failures_logged"] += len(failures)
                figures["plugin_failures_not_naming_it"] += sum("FaultPlugin" not in name for name in failures)
                figures["slow_hook_warnings"] += text.count("blocked the event loop")
                report.operator_exits.extend(ops.unexpected_exits)
                report.evidence(ops, namespace)

        # Faults in the hooks that see a run: one process, one object per hook and kind.
        labels = {f"f-{h.replace('_', '-')}-{k.lower()}": {"chaos-fault": f"{h}.{k}", "chaos-style": _style(h)}
                  for h in RUN_HOOKS for k in KINDS}
        labels["f-observe-finalizers"] = {"chaos-fault": "observe_outcome.finalizers", "chaos-style": "result"}
        await run(make(), labels, "run hooks")

        # Faults in the hooks asked once per process (Kopf's login activity included).
        configs = [(f"{h}.{k}", "TEMPORARY") for h in ("handler_options", "owned_fields") for k in KINDS]
        if QUICK:
            configs = [(f"{rng.choice(('handler_options', 'owned_fields'))}.{k}", "TEMPORARY") for k in KINDS]
        configs += [("owned_fields.RuntimeError", "IGNORED"), ("owned_fields.RuntimeError", "PERMANENT")]
        for i, (fault, errors) in enumerate(configs):
            figures.setdefault("process_configs", {})[f"o{i}"] = f"{fault} errors={errors}"
            pair = {f"o{i}-result": {"chaos-style": "result"}, f"o{i}-exception": {"chaos-style": "exception"}}
            await run(make(CHAOS_PROCESS_FAULT=fault, CHAOS_ERRORS=errors), pair, f"{fault} errors={errors}",
                      held=fault.startswith("handler_options."))

        # A hook that blocks the loop: how long another object's callback waits meanwhile.
        sleep = 10.0 if QUICK else 30.0
        ops = make(CHAOS_SLEEP=str(sleep))
        latency = await _blocked_latency(objects, namespace, ops, system, report, all_names)
        figures.update(sleep_s=sleep, other_object_callback_to_gone_s=latency)
        text = ops.text()
        figures["slow_hook_warnings"] += text.count("blocked the event loop")
        figures["slow_hook_warning_lines"] = [json.loads(line)["message"] for line in text.splitlines()
                                              if "blocked the event" in line]
        report.operator_exits.extend(ops.unexpected_exits)
        report.evidence(ops, namespace)
    report.objects = len(all_names)
    report.extra.update(figures)
    starts_figures(report, system, all_names)
    report.write()

    assert report.early_releases == []
    assert report.operator_exits == []
    assert figures["start_failures"] == []
    assert report.stuck == []
    assert figures["slow_hook_warnings"] >= 1
    # Logged "with its plugin's name": the class a user registered, not a number.
    assert [line for line in figures["slow_hook_warning_lines"] if "FaultPlugin" not in line] == []
    assert figures["plugin_failures_not_naming_it"] == 0
    assert report.extra["objects_not_started_exactly_once_by_key_main"] == []


async def _still_held(objects, namespace, names, ops, report) -> None:
    """Each deletion held past its callback, saying why: the finalizer stays while the options fail."""
    def said() -> bool:
        held = {r.object for op in ops.all for r in op.records() if "held: the handler's options" in r.message}
        return all(f"{namespace}/{name}" in held for name in names)
    assert await wait_until(lambda: _up_and(ops, said()), timeout=30), "the deletions were not held"
    found = await present(objects, namespace)
    for name in names:
        if DEFAULT_FINALIZER not in found.get(name, []):
            report.early_releases.append(f"main/{name}: released while its options could not be read")


def _style(hook: str) -> str:
    return "exception" if hook == "classify_exception" else "result"


def _up_and(ops: Operators, condition: bool) -> bool:
    ops.check()
    return condition or not ops.up


async def _blocked_latency(objects, namespace, ops, system, report, all_names) -> float | None:
    other, sleepy = "b-other", "b-sleepy"
    all_names.extend([other, sleepy])
    try:
        await ops.start()
        await create(objects, namespace, [other])
        await create(objects, namespace, [sleepy], {"chaos-fault": "adjust_outcome.sleep", "chaos-style": "result"})
        assert await wait_finalized(objects, namespace, [other, sleepy]), "finalizers were not added"
        await delete(objects, namespace, [other])
        assert await wait_until(lambda: system.started(other), timeout=30), "not started"
        await delete(objects, namespace, [sleepy])
        assert await wait_until(lambda: system.started(sleepy), timeout=30), "not started"
        sent = time.monotonic()  # the sleepy object's adjust hook is blocking the loop now
        await report.call_back(objects, namespace, other)

        async def gone() -> bool:
            return other not in {i["metadata"]["name"] for i in (await objects.list_namespaced_custom_object(
                "kopf.dev", "v1", namespace, "kopfexamples"))["items"]}
        latency = round(time.monotonic() - sent, 2) if await wait_until(gone, timeout=90, interval=0.1) else None
        await report.call_back(objects, namespace, sleepy)
        await report.settle(objects, namespace, [other, sleepy])
        ops.check()
        return latency
    finally:
        ops.stop()
