"""
The value rules, stated once: outcomes, handler options and policies all check their values here,
so that whatever passes a check (``kopf-outcomes check-policy`` included) cannot fail later at
run time for a value reason.

Each rule returns the normalised value or raises ``TypeError``/``ValueError`` with a message that
starts with "must be" and names the value; the caller puts the place in front of it.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Literal, TypeVar, get_args

T = TypeVar("T")

# Kopf stores "run again at" as a timestamp: a delay must fit in one. Waiting "until something
# changes" is Pending without recheck, not an endless delay.
MAX_DELAY = 366 * 24 * 3600

FatalOnDelete = Literal["release", "retain"]
FATAL_ON_DELETE: tuple[FatalOnDelete, ...] = get_args(FatalOnDelete)

#: A logging level by name, as outcomes take it beside a number (``logging.WARNING``): a misspelt
#: name fails type-checking, not only the run.
LevelName = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
LEVEL_NAMES: tuple[LevelName, ...] = get_args(LevelName)


def show(value: object) -> str:
    """A value as messages quote it; never fails, not even on an integer of 5,000 digits."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    try:
        return f"{float(value):g}"
    except OverflowError:
        return "a number too large to show"


def seconds(value: object) -> float:
    """A delay in seconds: a number from 0 to :data:`MAX_DELAY`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"must be a number of seconds, got {show(value)}")
    if not (0 <= value <= MAX_DELAY):  # NaN fails every comparison
        raise ValueError(f"must be a number of seconds from 0 to {MAX_DELAY} (a year), got {show(value)}")
    return float(value)


MIN_RECHECK = 1.0  # seconds: a shorter recheck is a busy loop, not a check of the outside world


def recheck(value: object) -> float:
    """A recheck interval: :data:`MIN_RECHECK` to :data:`MAX_DELAY` seconds."""
    found = seconds(value)
    if found < MIN_RECHECK:
        raise ValueError(f"must be at least {MIN_RECHECK:g} second (shorter is a busy loop; "
                         f"for a tight poll use Retry or a daemon), got {show(value)}")
    return found


def threshold_seconds(value: object) -> float:
    """A duration to compare with, not to wait for: any finite number of seconds, zero or more."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"must be a number of seconds, got {show(value)}")
    if not (0 <= value < math.inf):
        raise ValueError(f"must be a number of seconds, zero or more, got {show(value)}")
    return float(value)


def level(value: object) -> int:
    """A logging level: a number, or a name the logging module knows ("WARNING")."""
    if isinstance(value, str):
        number = logging.getLevelName(value.upper())
        if isinstance(number, int):
            return number
        raise ValueError(f"must be a logging level name such as {', '.join(LEVEL_NAMES)}, got {show(value)}")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise TypeError(f"must be a logging level (a number, or a name such as WARNING), got {show(value)}")


def flag(value: object) -> bool | None:
    """An option that is on or off (``True``/``False``); None leaves it to the next source. Nothing
    else is read as either: ``""`` or ``0`` read as off would turn a "not done" into a success."""
    if value is None or value.__class__ is bool:
        return value
    raise TypeError(f"must be True or False, got {show(value)}")


def fatal_on_delete(value: object) -> FatalOnDelete | None:
    """What a Fatal outcome does to the finalizer on deletion; None leaves it to the next source."""
    if value is None or value in FATAL_ON_DELETE:
        return value  # type: ignore[return-value,unused-ignore]
    raise ValueError(f"must be {' or '.join(map(repr, FATAL_ON_DELETE))}, got {show(value)}")


def reason(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"must be a string, got {show(value)}")
    return value


def checked(what: str, rule: Callable[[object], T], value: object) -> T:
    """Apply ``rule`` to ``value``; a failure names ``what`` in front of the rule's message."""
    try:
        return rule(value)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{what} {e}") from None
