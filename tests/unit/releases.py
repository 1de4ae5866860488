"""The release a person sets as the docs say: each retained handler's id with its retention's
stamp, read from the object's memory (as ``kopf-outcomes why`` and the log show it)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kopf_outcomes import memory


def stamped(annotations: Mapping[str, Any], *handler_ids: str) -> str:
    records = memory.parse(annotations[memory.DEFAULT_KEYS.memory])
    return ",".join(memory.release_value(handler_id, records[handler_id]) for handler_id in handler_ids)
