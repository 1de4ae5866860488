"""The release a person sets as the docs say: the retained handler's id with its retention's stamp,
read from the object's memory on the API server (as ``kopf-outcomes why`` prints it)."""
from __future__ import annotations

from typing import Any

from kopf_outcomes import memory
from tests.e2e.conftest import get_example


async def stamped(objects: Any, namespace: str, name: str, *handler_ids: str) -> str:
    body = await get_example(objects, namespace, name) or {}
    records = memory.parse(body["metadata"]["annotations"][memory.DEFAULT_KEYS.memory])
    return ",".join(memory.release_value(handler_id, records[handler_id]) for handler_id in handler_ids)
