"""
Stock parity: with the patch installed and no outcome, policy or plugin in use, Kopf behaves
as without it — same messages at the same levels, same patches — on the real API server.
"""
from __future__ import annotations

import asyncio
import re
from collections import Counter

import pytest

from kopf_outcomes_testing.process import OperatorProcess, Record
from tests.e2e.conftest import create_example, eventually, get_example

OPERATOR = "tests/e2e/operators/parity_operator.py"

_VOLATILE = [
    # The server orders managedFields by which manager wrote last: timing, not the operator.
    (re.compile(r"'managedFields': \[.*?\], 'name'"), "'managedFields': <managed>, 'name'"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?"), "<time>"),
    (re.compile(r"\d+\.\d+"), "<n>"),
    (re.compile(r"'resourceVersion': '\d+'"), "'resourceVersion': <rv>"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uid>"),
    (re.compile(r"'value': '\d+'"), "'value': <rv>"),
]
# Records that depend on scheduling: how long a sleep was, whether an event came mid-sleep.
_SKIPPED = ("Sleeping", "Handling cycle is finished", "Timer 'timer_fn' has exited")


def normalized(record: Record) -> tuple[str, str]:
    message = record.message
    for pattern, replacement in _VOLATILE:
        message = pattern.sub(replacement, message)
    return record.level, message


async def scenario(make_operator, objects, namespace: str, name: str, spec: dict, *, install: bool,
                   settle: float) -> list[tuple[str, str]]:
    op: OperatorProcess = make_operator(OPERATOR, INSTALL_KOPF_OUTCOMES="1" if install else "0")
    async with op:
        await create_example(objects, namespace, name, spec)
        await asyncio.sleep(settle)
        if spec.get("mode") == "retries":
            await objects.patch_namespaced_custom_object(
                "kopf.dev", "v1", namespace, "kopfexamples", name, {"spec": {"changed": True}},
                _content_type="application/merge-patch+json")
            await asyncio.sleep(settle)
        await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", name)
        await eventually(lambda: _gone(objects, namespace, name), timeout=30, what="deletion")
        await asyncio.sleep(0.5)
    return [normalized(r) for r in op.records(f"{namespace}/{name}")
            if not any(skipped in r.message for skipped in _SKIPPED)]


async def _gone(objects, namespace: str, name: str) -> bool:
    return await get_example(objects, namespace, name) is None


@pytest.mark.parametrize("spec, settle", [
    ({"mode": "success"}, 1.5),
    ({"mode": "temporary"}, 4),
    ({"mode": "permanent"}, 1.5),
    ({"mode": "arbitrary"}, 3),
    ({"mode": "retries"}, 3),
    ({"mode": "success", "subs": True}, 3),
    ({"mode": "daemon"}, 4),
    ({"mode": "timer"}, 3.5),
], ids=lambda v: v["mode"] + ("+subs" if v.get("subs") else "") if isinstance(v, dict) else None)
async def test_stock_parity(objects, namespace, operator, spec, settle):
    name = spec["mode"] + ("-subs" if spec.get("subs") else "")
    stock = await scenario(operator, objects, namespace, name, spec, install=False, settle=settle)
    ours = await scenario(operator, objects, namespace, name, spec, install=True, settle=settle)
    assert stock, "the scenario produced no records"
    if spec["mode"] == "timer":  # the number of timer runs in a time window varies by one
        stock, ours = _first_runs(stock), _first_runs(ours)
    assert Counter(ours) == Counter(stock), _diff(stock, ours)
    assert [r for r in ours if "Handler" in r[1] or "Daemon" in r[1]] == \
           [r for r in stock if "Handler" in r[1] or "Daemon" in r[1]]


def _first_runs(records: list[tuple[str, str]]) -> list[tuple[str, str]]:
    timer = [r for r in records if "timer_fn" in r[1]][:5]
    return [r for r in records if "timer_fn" not in r[1] and "touch" not in r[1]] + timer


def _diff(stock: list[tuple[str, str]], ours: list[tuple[str, str]]) -> str:
    only_stock = Counter(stock) - Counter(ours)
    only_ours = Counter(ours) - Counter(stock)
    return f"only in stock: {dict(only_stock)}\nonly with the patch: {dict(only_ours)}"
