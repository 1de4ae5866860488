"""
The four outcomes of a handler run: what it *means*, not just whether it raised.

An outcome is an exception so that a handler can either ``return`` it or ``raise`` it
from deep inside its own helpers; both forms are equal.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Literal

FatalOnDelete = Literal["release", "retain"]


def _level(value: int | str, *, what: str) -> int:
    """Accept logging levels as numbers or names ("WARNING"), as the logging module does."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"{what}: a logging level must be an int or a level name, got {value!r}")
    if isinstance(value, str):
        number = logging.getLevelName(value.upper())
        if not isinstance(number, int):
            raise ValueError(f"{what}: unknown logging level name {value!r}")
        return number
    return value


# Kopf stores "run again at" as a timestamp: a delay must fit in one. Waiting "until something
# changes" is Pending without recheck, not an endless delay.
MAX_DELAY = 366 * 24 * 3600


def _seconds(value: float | None, *, what: str, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, got {value!r}")
    if value < 0 or math.isnan(value):
        raise ValueError(f"{what} must be zero or positive, got {value!r}")
    if value > MAX_DELAY:
        raise ValueError(f"{what} must be at most {MAX_DELAY} seconds (a year), got {value!r}; "
                         f"to wait until something changes, use Pending() without recheck")
    return float(value)


def _reason(value: object, *, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what}: the reason must be a string, got {value!r}")
    return value


class Outcome(Exception):
    """What one handler run means. Return it or raise it from a handler."""

    def _fields(self) -> tuple[Any, ...]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Outcome) and type(other) is type(self) and other._fields() == self._fields()

    def __hash__(self) -> int:
        return hash((type(self), self._fields()))

    def __repr__(self) -> str:
        args = ", ".join(repr(field) for field in self._fields())
        return f"{type(self).__name__}({args})"


class Success(Outcome):
    """Done. Logged exactly as Kopf logs a handler that returned; the result is stored as usual."""

    def __init__(self, result: object = None) -> None:
        super().__init__()
        self.result = result

    def _fields(self) -> tuple[Any, ...]:
        return (self.result,)

    def __str__(self) -> str:
        return "success"


class Pending(Outcome):
    """
    Not done, and not an error: waiting for something outside the operator.

    The finalizer is kept. The handler runs again when the state it depends on changes,
    or after ``recheck`` seconds if given. With neither, it stays parked at zero cost.
    """

    def __init__(self, reason: str, *, recheck: float | None = None) -> None:
        super().__init__(reason)
        self.reason = _reason(reason, what="Pending")
        self.recheck = _seconds(recheck, what="Pending(recheck=...)", optional=True)

    def _fields(self) -> tuple[Any, ...]:
        return (self.reason, self.recheck)

    def __str__(self) -> str:
        return self.reason


class Retry(Outcome):
    """A temporary failure, retried after ``delay`` seconds, logged at the chosen ``level``."""

    def __init__(self, reason: str, *, delay: float = 60, level: int | str = logging.WARNING) -> None:
        super().__init__(reason)
        self.reason = _reason(reason, what="Retry")
        self.delay = _seconds(delay, what="Retry(delay=...)") or 0.0
        self.level = _level(level, what="Retry(level=...)")

    def _fields(self) -> tuple[Any, ...]:
        return (self.reason, self.delay, self.level)

    def __str__(self) -> str:
        return self.reason


class Fatal(Outcome):
    """
    A permanent failure: the handler never runs again for this cause.

    On deletion, ``on_delete`` decides the finalizer: ``"release"`` lets the object go
    (stock Kopf), ``"retain"`` keeps it until a person releases it. ``None`` leaves the
    choice to policies, and finally to stock behaviour (release).
    """

    def __init__(
        self,
        reason: str,
        *,
        level: int | str = logging.ERROR,
        on_delete: FatalOnDelete | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = _reason(reason, what="Fatal")
        self.level = _level(level, what="Fatal(level=...)")
        if on_delete not in (None, "release", "retain"):
            raise ValueError(f"Fatal(on_delete=...) must be 'release' or 'retain', got {on_delete!r}")
        self.on_delete: FatalOnDelete | None = on_delete

    def _fields(self) -> tuple[Any, ...]:
        return (self.reason, self.level, self.on_delete)

    def __str__(self) -> str:
        return self.reason
