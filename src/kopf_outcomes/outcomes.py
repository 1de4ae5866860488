"""
The four outcomes of a handler run: what it *means*, not just whether it raised.

An outcome is an exception so that a handler can either ``return`` it or ``raise`` it
from deep inside its own helpers; both forms are equal. Without ``install()``, stock Kopf
would read a returned outcome as success, and a raised one by the handler's ``errors=`` mode:
:mod:`kopf_outcomes.misuse` makes sure it fails loudly instead.
"""
from __future__ import annotations

import logging
from typing import Any, TypeVar

import kopf

from kopf_outcomes import misuse, values
from kopf_outcomes.errors import OutcomeMisreadError
from kopf_outcomes.values import FatalOnDelete, LevelName, checked

__all__ = ["Fatal", "FatalOnDelete", "LevelName", "Outcome", "Pending", "Retry", "Success", "deadline_of",
           "with_deadline"]


class Outcome(kopf.TemporaryError):
    """What one handler run means. Return it or raise it from a handler.

    It is a ``kopf.TemporaryError`` only for stock Kopf's sake (see :mod:`kopf_outcomes.misuse`);
    with kopf-outcomes installed, every outcome is read as what it is.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._misread = misuse.misread()  # made inside a handler that stock Kopf invoked

    def _fields(self) -> tuple[Any, ...]:
        """What it is compared and shown by; an outcome of a user's own making: its reason."""
        return (self._reason(),)

    def __str__(self) -> str:
        reason = self._reason()
        return f"{reason} ({misuse.HINT})" if self._misread else reason

    def _reason(self) -> str:
        return str(getattr(self, "reason", ""))

    def __deepcopy__(self, memo: dict[int, object]) -> Outcome:
        if not misuse.is_installed():
            raise OutcomeMisreadError(f"{type(self).__name__}({self._reason()!r}) was returned to stock Kopf: "
                                      f"{misuse.HINT}. The object is left as it was, finalizers included.")
        return self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Outcome) and type(other) is type(self) and other._fields() == self._fields()

    def __hash__(self) -> int:
        return hash((type(self), self._fields()))

    def __repr__(self) -> str:
        args = ", ".join(repr(field) for field in self._fields())
        return f"{type(self).__name__}({args})"


class Success(Outcome):
    """Done. Logged exactly as Kopf logs a handler that returned; the result is stored as usual."""

    #: What the handler returned: Kopf stores it as the handler's result.
    result: object

    def __init__(self, result: object = None) -> None:
        super().__init__()
        self.args = ()  # no reason to carry
        self.result = result

    def _fields(self) -> tuple[Any, ...]:
        return (self.result,)

    def _reason(self) -> str:
        return "success"


class Pending(Outcome):
    """
    Not done, and not an error: waiting for something outside the operator.

    The finalizer is kept. The handler runs again when the state it depends on changes,
    or after ``recheck`` seconds if given. With neither, it stays parked at zero cost.
    """

    #: What the handler waits for: logged, posted in an Event, kept in the handler's memory.
    reason: str
    #: Seconds after which the handler runs again even if nothing changed; None: only on a change.
    recheck: float | None

    def __init__(self, reason: str, *, recheck: float | None = None) -> None:
        super().__init__(reason, delay=60)
        self.reason = checked("Pending(reason)", values.reason, reason)
        self.recheck = None if recheck is None else checked("Pending(recheck=...)", values.recheck, recheck)

    # Set by :func:`with_deadline` only: not a field (equal outcomes stay equal).
    _deadline: float | None = None

    def _fields(self) -> tuple[Any, ...]:
        return (self.reason, self.recheck)


def with_deadline(outcome: PendingOrRetry, runtime: float) -> PendingOrRetry:
    """
    A copy of a Pending that runs again once the handler has been at it for ``runtime`` seconds
    (Kopf's ``runtime``, from its start), even if nothing changes: what a time-based escalation
    needs, as a parked Pending runs again only on a change. The earlier of two deadlines holds.
    A Retry's copy runs no later than then: its delay is cut when Kopf takes it, at the run's end
    (Kopf counts a delay from there; a cut by the run's start ran late by the run's own time).
    """
    copy: Pending | Retry
    if isinstance(outcome, Retry):
        copy = Retry(outcome.reason, delay=outcome.delay, level=outcome.level)
    else:
        copy = Pending(outcome.reason, recheck=outcome.recheck)
    earlier = deadline_of(outcome)
    copy._deadline = runtime if earlier is None else min(earlier, runtime)
    return copy  # type: ignore[return-value]  # the type it was given


def deadline_of(outcome: Outcome) -> float | None:
    """The runtime at which a Pending must run again whatever happens, or before which a Retry
    must run (:func:`with_deadline`)."""
    return outcome._deadline if isinstance(outcome, (Pending, Retry)) else None


class Retry(Outcome):
    """A temporary failure, retried after ``delay`` seconds, logged at the chosen ``level``."""

    #: Why it failed: logged, posted in an Event, kept in the handler's memory.
    reason: str
    #: Seconds until the next run.
    delay: float
    #: The logging level of its log line (a number: a name given is turned into one).
    level: int

    def __init__(self, reason: str, *, delay: float = 60, level: int | LevelName = logging.WARNING) -> None:
        super().__init__(reason)
        self.reason = checked("Retry(reason)", values.reason, reason)
        self.delay = checked("Retry(delay=...)", values.seconds, delay)
        self.level = checked("Retry(level=...)", values.level, level)

    # Set by :func:`with_deadline` only: not a field (equal outcomes stay equal).
    _deadline: float | None = None

    def _fields(self) -> tuple[Any, ...]:
        return (self.reason, self.delay, self.level)



PendingOrRetry = TypeVar("PendingOrRetry", Pending, Retry)


class Fatal(Outcome):
    """
    A permanent failure: the handler never runs again for this cause.

    On deletion, ``on_delete`` decides the finalizer: ``"release"`` lets the object go
    (stock Kopf), ``"retain"`` keeps it until a person releases it. ``None`` leaves the
    choice to policies, and finally to stock behaviour (release).
    """

    #: Why it failed: logged, posted in an Event, kept in the handler's memory.
    reason: str
    #: The logging level of its log line (a number: a name given is turned into one).
    level: int
    #: On deletion: ``"release"`` or ``"retain"`` the finalizer; None leaves it to policies.
    on_delete: FatalOnDelete | None

    def __init__(
        self,
        reason: str,
        *,
        level: int | LevelName = logging.ERROR,
        on_delete: FatalOnDelete | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = checked("Fatal(reason)", values.reason, reason)
        self.level = checked("Fatal(level=...)", values.level, level)
        self.on_delete = checked("Fatal(on_delete=...)", values.fatal_on_delete, on_delete)

    def _fields(self) -> tuple[Any, ...]:
        return (self.reason, self.level, self.on_delete)

