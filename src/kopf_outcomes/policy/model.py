"""
The policy model: what a policy file says, as frozen dataclasses.

The shape mirrors the TOML file one to one, so a policy written in Python and one loaded from
TOML are the same thing, checked by the same code. ``None`` always means "not set here": a less
specific scope, and finally the stock reading, decides.
"""
from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping
from typing import Literal

from kopf_outcomes.outcomes import FatalOnDelete

OutcomeName = Literal["success", "pending", "retry", "fatal"]
OUTCOME_NAMES: tuple[OutcomeName, ...] = ("success", "pending", "retry", "fatal")


@dataclasses.dataclass(frozen=True)
class Backoff:
    """
    Exponential retry delays: ``base * factor ** retry`` seconds, at most ``cap``.

    ``jitter`` (0 to 1) takes a random fraction of up to that much off each delay, so that
    many objects failing together do not retry in lockstep, and the cap is never exceeded.
    """

    base: float
    factor: float = 2.0
    cap: float = 3600.0
    jitter: float = 0.0

    def delay(self, retry: int) -> float:
        """The delay before the next run, after ``retry`` previous runs (Kopf's ``retry``)."""
        try:
            raw = self.base * self.factor ** retry
        except OverflowError:
            raw = math.inf
        return min(raw, self.cap) * (1.0 - self.jitter * random.random())


@dataclasses.dataclass(frozen=True)
class Escalation:
    """
    One step of escalation: once reached, a Retry is logged at least at ``level``, and with
    ``outcome="fatal"`` a Retry or a Pending becomes a Fatal.

    Reached when the handler has run ``after_tries`` times before (Kopf's ``retry`` kwarg),
    or has been at it for ``after_seconds`` (Kopf's ``runtime``). Exactly one must be set.
    """

    after_tries: int | None = None
    after_seconds: float | None = None
    level: int | None = None
    outcome: Literal["fatal"] | None = None

    def reached(self, retry: int, runtime: float) -> bool:
        if self.after_tries is not None:
            return retry >= self.after_tries
        return self.after_seconds is not None and runtime >= self.after_seconds


@dataclasses.dataclass(frozen=True)
class Levels:
    """Log levels for Retry and Fatal outcomes that no rule and no handler gave a level to.

    Pending has none: by contract it is INFO when it begins and DEBUG while unchanged.
    """

    retry: int | None = None
    fatal: int | None = None


@dataclasses.dataclass(frozen=True)
class ExceptionRule:
    """
    What an exception of one type (or a subclass) means.

    Without ``outcome``, the stock reading's outcome is kept (a TemporaryError stays a Retry)
    and only the fields given here change it. For ``pending``, ``delay`` is the recheck time.
    ``delay`` (fixed) and ``backoff`` (exponential) are alternatives.
    """

    outcome: OutcomeName | None = None
    level: int | None = None
    delay: float | None = None
    backoff: Backoff | None = None
    escalate: tuple[Escalation, ...] | None = None


@dataclasses.dataclass(frozen=True)
class Scope:
    """
    The settings of one scope: the whole operator, one resource, or one handler id.

    ``exceptions`` maps dotted class names (``"kopf.TemporaryError"``) to rules.
    ``delay``/``backoff``, ``levels`` and ``escalate`` shape every Retry/Fatal in the scope;
    the other fields are :class:`~kopf_outcomes.HandlerOptions` for the handlers in it.
    """

    explicit_completion: bool | None = None
    depends_on: tuple[str, ...] | None = None
    remember: bool | None = None
    fatal_on_delete: FatalOnDelete | None = None
    ignore: tuple[str, ...] | None = None
    levels: Levels = Levels()
    delay: float | None = None
    backoff: Backoff | None = None
    escalate: tuple[Escalation, ...] | None = None
    exceptions: Mapping[str, ExceptionRule] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Policy:
    """
    A whole policy. ``defaults`` is the global scope (the top level of a TOML file);
    ``handlers`` is keyed by handler id, ``resources`` by ``plural.version.group``,
    ``plural.group``, ``plural`` or ``Kind``.
    """

    defaults: Scope = Scope()
    handlers: Mapping[str, Scope] = dataclasses.field(default_factory=dict)
    resources: Mapping[str, Scope] = dataclasses.field(default_factory=dict)
