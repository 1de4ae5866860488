"""Two operators with kopf-outcomes on one resource, equal handler ids: each memory is its own."""
from __future__ import annotations

import asyncio

from kopf_outcomes.memory import DEFAULT_KEYS, keys_for
from tests.e2e.conftest import create_example, eventually, get_example
from tests.e2e.test_memory import patch
from tests.e2e.test_outcomes import FINALIZER

OPERATOR = "tests/e2e/operators/identity_operator.py"
OTHER_FINALIZER = "b.example.com/finalizer"


def starts(op, operator_id: str) -> int:
    return sum(1 for r in op.records() if r.message == f"starting the external cleanup of operator {operator_id}")


async def test_each_operator_starts_its_own_cleanup_once_and_releases_only_its_own_finalizer(
        objects, namespace, operator):
    async with operator(OPERATOR, OPERATOR_ID="default") as a, operator(OPERATOR, OPERATOR_ID="b") as b:
        await create_example(objects, namespace, "shared")

        async def finalizers() -> list[str]:
            body = await get_example(objects, namespace, "shared")
            return sorted((body or {}).get("metadata", {}).get("finalizers") or [])

        await eventually(lambda: _equal(finalizers(), sorted([FINALIZER, OTHER_FINALIZER])),
                         what="both finalizers")
        await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", "shared")
        await eventually(lambda: asyncio.sleep(0, starts(a, "default") == 1 and starts(b, "b") == 1),
                         what="both cleanups to start")

        async def memories() -> bool:  # each written in its operator's PATCH, just after the log line
            body = await get_example(objects, namespace, "shared")
            annotations = (body or {}).get("metadata", {}).get("annotations") or {}
            return DEFAULT_KEYS.memory in annotations and keys_for(OTHER_FINALIZER).memory in annotations

        await eventually(memories, what="both operators' memories, each under its own key")
        assert DEFAULT_KEYS.memory != keys_for(OTHER_FINALIZER).memory

        # The first operator's callback: it releases its own finalizer, the other one stays, untouched.
        await patch(objects, namespace, "shared", {"metadata": {"labels": {"done-default": "yes"}}})
        await eventually(lambda: _equal(finalizers(), [OTHER_FINALIZER]), what="the first finalizer to go")
        await asyncio.sleep(1.5)
        assert await finalizers() == [OTHER_FINALIZER]
        assert (starts(a, "default"), starts(b, "b")) == (1, 1)

        await patch(objects, namespace, "shared", {"metadata": {"labels": {"done-b": "yes"}}})
        await eventually(lambda: _is_none(get_example(objects, namespace, "shared")), what="the object to go")
        assert (starts(a, "default"), starts(b, "b")) == (1, 1)


async def _equal(value, expected) -> bool:
    return await value == expected


async def _is_none(value) -> bool:
    return await value is None
