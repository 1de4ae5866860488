"""An operator's code that uses the public types as documented: no error expected."""
from __future__ import annotations

import logging

import kopf_outcomes
from kopf_outcomes import Fatal, MemoryRecord, ObjectRef, Retry


def children() -> list[str]:
    memory = kopf_outcomes.recall()
    objects: tuple[ObjectRef, ...] = memory.objects
    previous: MemoryRecord | None = memory.previous
    if previous is not None and previous["outcome"] == "pending" and previous.get("recheck"):
        pass
    return [child.name for child in objects if not child.deleting]


def outcomes() -> list[kopf_outcomes.Outcome]:
    level: kopf_outcomes.LevelName = "INFO"
    return [Retry("busy", level="WARNING"), Retry("busy", level=logging.INFO), Retry("busy", level=level),
            Fatal("gone", level=40), Fatal("gone", level="CRITICAL", on_delete="retain")]
