"""
The kinds of Kopf handlers, and what each outcome means in each of them: the one table.

Kopf runs every kind of handler through the same functions, but an outcome does not mean the
same everywhere: a change handler that is ``Pending`` keeps its object's finalizer and waits
for the object to change; a timer has no finalizer and ticks again anyway; a webhook must
answer the API server now. The kind is decided once, where Kopf calls us (the Kopf boundary),
and every later step asks this table. ``docs/reference/kinds.md`` shows it to users.
"""
from __future__ import annotations

import enum

from kopf_outcomes.outcomes import Fatal, Outcome, Pending, Success

__all__ = ["PERSISTING", "STOCK", "Effect", "Kind", "effect_of"]


class Kind(str, enum.Enum):
    """The kind of a handler, by the Kopf cause that runs it (a plain string too: ``"timer"``)."""

    CHANGE = "change"            # @kopf.on.create/update/delete/resume/field
    SUBHANDLER = "sub-handler"   # kopf.execute(), @kopf.subhandler, kopf.register in a change handler
    TIMER = "timer"              # @kopf.timer
    DAEMON = "daemon"            # @kopf.daemon
    ACTIVITY = "activity"        # @kopf.on.startup/cleanup/probe
    LOGIN = "login"              # @kopf.on.login, and Kopf's own login handlers: their value is the credentials
    WEBHOOK = "webhook"          # @kopf.on.validate/mutate
    EVENT = "event"              # @kopf.on.event
    INDEX = "index"              # @kopf.index

    @property
    def persists(self) -> bool:
        """Whether Kopf keeps this kind's progress in the object: only then is there a per-state
        memory, parking, rechecking without writes, and a finalizer to keep."""
        return self in PERSISTING


# The kinds that persist (``Kind.persists``).
PERSISTING = (Kind.CHANGE, Kind.SUBHANDLER)


class Effect(enum.Enum):
    """What an outcome does, in Kopf's terms."""

    DONE = "done: the handler succeeded, its result stored as Kopf stores it"
    PARK = "parked: the finalizer is kept; runs again when the state it depends on changes"
    RECHECK = "rechecked: runs again every `recheck` seconds, or at once on a change, without writes"
    SKIP = "skipped quietly: this tick ends; the timer ticks again at its interval"
    POLL = "polled quietly: runs again after `recheck` seconds, logged at INFO, never ERROR"
    RETRY = "retried after `delay` at the chosen level; counts against `retries=` and `timeout=`"
    FAIL = "failed: stops, logged at the chosen level; on deletion the finalizer guard decides"
    REJECT = "rejected: the API server gets the reason as the webhook's answer, unmarked"
    REFUSE = "refused: logged at ERROR as a misuse that names the kind; Kopf reads it as failed"


# Pending without a recheck, Pending with one, Retry, Fatal; Success is DONE in every kind.
_TABLE: dict[Kind, tuple[Effect, Effect, Effect, Effect]] = {
    Kind.CHANGE: (Effect.PARK, Effect.RECHECK, Effect.RETRY, Effect.FAIL),
    Kind.SUBHANDLER: (Effect.PARK, Effect.RECHECK, Effect.RETRY, Effect.FAIL),
    Kind.TIMER: (Effect.SKIP, Effect.POLL, Effect.RETRY, Effect.FAIL),
    Kind.DAEMON: (Effect.REFUSE, Effect.POLL, Effect.RETRY, Effect.FAIL),
    Kind.ACTIVITY: (Effect.REFUSE, Effect.POLL, Effect.RETRY, Effect.FAIL),
    Kind.LOGIN: (Effect.REFUSE, Effect.REFUSE, Effect.REFUSE, Effect.REFUSE),
    Kind.WEBHOOK: (Effect.REJECT, Effect.REJECT, Effect.REJECT, Effect.REJECT),
    Kind.EVENT: (Effect.REFUSE, Effect.REFUSE, Effect.REFUSE, Effect.REFUSE),
    Kind.INDEX: (Effect.REFUSE, Effect.REFUSE, Effect.REFUSE, Effect.REFUSE),
}

# The kinds whose row refuses every outcome: Kopf's own, untouched. No
# plugin, policy, memory or observer sees their runs, so none can turn a result into an outcome
# there (the library's own indexers are of this kind: a plugin failing on a child, or a global
# ``explicit_completion``, must not drop the child from the index); only an outcome that the
# handler itself returns or raises is refused, at ERROR, as its row says. Decided once per cycle.
STOCK = tuple(kind for kind, row in _TABLE.items() if set(row) == {Effect.REFUSE})

# Why a cell refuses: said in the error, so that the user learns what to do instead.
REFUSALS: dict[Kind, str] = {
    Kind.DAEMON: "a daemon that exits is not started again until the operator restarts; "
                 "give Pending a recheck= to run again after a pause, or return to exit",
    Kind.ACTIVITY: "an activity has no object whose change could wake it, so the operator would "
                   "wait for ever; give Pending a recheck= to poll",
    Kind.LOGIN: "a login handler's value is the operator's credentials; return them (a kopf.ConnectionInfo) or "
                "None, or raise a Kopf error",
    Kind.EVENT: "an @kopf.on.event handler runs once per event and is never retried; "
                "return a plain value or raise a Kopf error",
    Kind.INDEX: "an indexer's value is its return value; return a plain value or raise a Kopf error",
}


def effect_of(kind: Kind, outcome: Outcome) -> Effect:
    """The cell of the table for this kind and outcome (an unknown outcome type: RETRY)."""
    if isinstance(outcome, Success):
        return Effect.DONE
    pending, rechecking, retrying, failing = _TABLE[kind]
    if isinstance(outcome, Pending):
        return pending if outcome.recheck is None else rechecking
    if isinstance(outcome, Fatal):
        return failing
    return retrying  # a Retry; an outcome type of a user's own making is turned into one
