"""
What plugins are told about one handler run: a read-only view, free of Kopf's internals.

Plugins see these types only, so they keep working when Kopf's private structures move.
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

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


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class HandlerRun:
    """
    One run of one handler, as hooks see it: read-only.

    ``reason`` is Kopf's cause reason ("create", "update", "delete", "resume", ...) for
    change handlers, and None for daemons, timers, activities and other handler kinds.
    ``retry`` counts the previous runs, as Kopf's own ``retry`` kwarg does.
    ``runtime`` is the seconds since the handler first started, as Kopf counts them.
    ``previous`` is what this handler's memory said before this run (None when nothing).
    ``kind`` is the handler's :class:`~kopf_outcomes.Kind`: what each outcome means depends on it.
    ``finalizer`` is the operator's Kopf finalizer: what tells one operator's writes from another's
    on a resource that several operators serve (the bundled conditions plugin prefixes its types by it).
    ``siblings`` are the other handlers of this cause on this object (of the same parent, for a
    sub-handler), by id: whether each has concluded, by Kopf's progress. Kopf runs one handler per
    cycle by default, so the others run later; None where it is not known (read it inside the hook).

    The runs that hooks get read their fields from Kopf's objects when a hook asks (most
    observers read few of them): read what you need inside the hook, as a run kept for later
    reads ``runtime`` and ``deleting`` later. ``_asdict()`` gives the fields as a dict and
    ``_replace(**changes)`` a copy with some of them changed; a run is not a tuple (no indexing,
    no unpacking, no hashing).
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
    # The handler's kind (kopf_outcomes.Kind, a string too): "change", "sub-handler", "timer", ...
    kind: str = "change"
    # The operator's Kopf finalizer (``settings.persistence.finalizer``): its identity among the
    # operators of one resource, from which the memory's keys derive (None: not known, read as the default).
    finalizer: str | None = None
    # The other handlers of the cause and whether each concluded (None: not known).
    siblings: Mapping[str, bool] | None = None

    def _asdict(self) -> dict[str, Any]:
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(HandlerRun)}

    def _replace(self, **changes: Any) -> HandlerRun:
        return dataclasses.replace(self, **changes)

    def __eq__(self, other: object) -> bool:  # by the fields, however each run reads them
        if not isinstance(other, HandlerRun):
            return NotImplemented
        return self._asdict() == other._asdict()

    def __repr__(self) -> str:
        return f"HandlerRun({', '.join(f'{name}={value!r}' for name, value in self._asdict().items())})"


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

    def __setattr__(self, name: str, value: object) -> None:
        # Refused in the frame of the hook that sets it: the plugin is named from its traceback.
        if name == "outcome" and not isinstance(value, Outcome):
            raise TypeError(f"decision.outcome must be an Outcome (Success, Pending, Retry or Fatal), "
                            f"got {value!r}")
        super().__setattr__(name, value)

    @property
    def stock(self) -> bool:
        return self.outcome is self.stock_reading
