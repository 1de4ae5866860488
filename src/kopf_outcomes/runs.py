"""
What plugins are told about one handler run: a read-only view, free of Kopf's internals.

Plugins see these types only, so they keep working when Kopf's private structures move.
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any, NamedTuple

from kopf_outcomes.memory import MemoryRecord
from kopf_outcomes.options import HandlerOptions
from kopf_outcomes.outcomes import Outcome


@dataclasses.dataclass(frozen=True)
class ResourceRef:
    """The resource kind a handler serves; ``kind`` may be unknown (None) in Kopf's selectors."""

    group: str
    version: str
    plural: str
    kind: str | None = None

    def __str__(self) -> str:
        return f"{self.plural}.{self.version}.{self.group}" if self.group else f"{self.plural}.{self.version}"


class HandlerRun(NamedTuple):
    """
    One run of one handler, as hooks see it: read-only (a named tuple: built on every observed
    run, it must be cheap — a frozen dataclass cost twice as much there).

    ``reason`` is Kopf's cause reason ("create", "update", "delete", "resume", ...) for
    change handlers, and None for daemons, timers, activities and other handler kinds.
    ``retry`` counts the previous runs, as Kopf's own ``retry`` kwarg does.
    ``previous`` is what this handler's memory said before this run (None when nothing).
    """

    handler_id: str
    reason: str | None
    resource: ResourceRef | None
    body: Mapping[str, Any] | None
    retry: int
    runtime: float
    deleting: bool
    options: HandlerOptions
    logger: logging.Logger | logging.LoggerAdapter[Any]
    previous: MemoryRecord | None = None
    # What stock Kopf would do with an arbitrary exception, for the built-in classification.
    errors_mode: str = "TEMPORARY"
    backoff: float = 60.0


@dataclasses.dataclass
class Decision:
    """
    The outcome being decided, passed to every adjustment hook in turn.

    An adjustment hook replaces ``outcome`` to change the decision; the next hook sees
    the replacement. ``origin`` is the handler's own result or exception, unchanged.

    ``stock`` tells whether ``outcome`` is still stock Kopf's own reading of the origin (a plain
    result, a Kopf exception, an arbitrary exception by the ``errors=`` mode), which no plugin
    and no handler has chosen. A stock outcome that no hook replaces is left to Kopf entirely:
    same messages, levels and patches as without kopf-outcomes.
    """

    outcome: Outcome
    origin: object = None
    stock_reading: Outcome | None = dataclasses.field(default=None, repr=False)

    @property
    def stock(self) -> bool:
        return self.outcome is self.stock_reading
