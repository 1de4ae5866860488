"""
What a running handler can ask about its own memory: has it already acted on this exact state?

A Pending handler is re-run by a recheck timer, or woken when its state changes. Side effects
such as "start the external process" must happen once per state, not once per run:

    if not kopf_outcomes.recall().acted_on_this_state:
        start_external_process()
    return kopf_outcomes.Pending("waiting for the callback")
"""
from __future__ import annotations

import dataclasses

from kopf_outcomes.memory import Record


@dataclasses.dataclass(frozen=True)
class Recall:
    """The handler's previous conclusion, and whether it was about the state it sees now."""

    previous: Record | None
    digest: str

    @property
    def acted_on_this_state(self) -> bool:
        return self.previous is not None and self.previous["digest"] == self.digest


def recall() -> Recall:
    """Ask from inside a handler; outside of one (or without ``install()``) it is an error."""
    from kopf_outcomes.patch import current_recall

    return current_recall()
