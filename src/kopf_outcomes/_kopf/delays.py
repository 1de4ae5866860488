"""
Our delays by identity: which handlers of this cycle are ours (parked, retained or rechecking),
told to Kopf's ``apply()`` of the same cycle, and nothing else.

Kopf's ``apply()`` gets one list of delays: its daemons' first, then ``State.delays`` of the
change handlers, one per active unfinished handler, in the state's order. A cycle knows which
of those handlers are ours, so ``apply()`` drops exactly their positions: a stock delay is never
taken for ours, whatever its value.

A value a cycle tells its ``apply()`` (:class:`PerPatch`: our delays, and a held cycle's patch for
:mod:`.own_writes`) is keyed to the very patch object Kopf hands that ``apply()``: it reaches it
whichever task runs the cycle (a tool's own task, where a context variable set inside would not come
back), and no other ``apply()`` can take it. Held weakly where the patch allows it (Kopf's ``Patch``
does): a cycle that never reaches ``apply()`` leaves nothing behind once its patch is gone.
"""
from __future__ import annotations

import asyncio
import functools
import weakref
from collections.abc import Callable, Collection, Sequence
from typing import Generic, NamedTuple, TypeVar

from kopf_outcomes._kopf.internals import State, progresses

T = TypeVar("T")


class PerPatch(Generic[T]):
    """Values by patch object; each is taken once."""

    def __init__(self) -> None:
        self._values: dict[int, tuple[Callable[[], object], T]] = {}

    def put(self, patch: object, value: T) -> None:
        key = id(patch)

        def forget(_: object) -> None:
            self._values.pop(key, None)

        holder: Callable[[], object]
        try:
            holder = weakref.ref(patch, forget)
        except TypeError:  # a patch that cannot be referenced weakly (not Kopf's): held until taken
            holder = functools.partial(_same, patch)
        self._values[key] = (holder, value)

    def take(self, patch: object) -> T | None:
        """The value told for this very patch object, if any; it is then forgotten."""
        entry = self._values.get(id(patch))
        if entry is None or entry[0]() is not patch:
            return None
        del self._values[id(patch)]
        return entry[1]


def _same(value: object) -> object:
    return value


class Ours(NamedTuple):
    """This cycle's handlers in Kopf's list of delays, and when our rechecks are due."""

    positions: tuple[bool, ...]  # per delay of the change handlers, in Kopf's order: ours?
    rechecks: tuple[float, ...]  # loop times at which rechecking handlers are due
    wake: tuple[str, ...] = ()  # parked on other objects: what wakes them (objects.wait)
    moved: Callable[[], bool] | None = None  # whether those objects changed since their handlers ran


_ours: PerPatch[Ours] = PerPatch()


def tell(patch: object, final: State, ours: Collection[str], waits: Sequence[float],
         wake: tuple[str, ...] = (), moved: Callable[[], bool] | None = None) -> None:
    """Tell this cycle's ``apply()`` which delays are ours; ``final`` is the state as Kopf will
    have it (``state.with_outcomes(outcomes)``), ``waits`` the seconds until our rechecks,
    ``wake`` and ``moved`` what wakes the handlers parked on other objects."""
    if not ours and not waits and not wake:
        _ours.take(patch)  # none of this cycle's delays is ours
        return
    positions = tuple(str(handler_id) in ours for handler_id, progress in progresses(final)
                      if progress.active and not progress.finished)
    now = asyncio.get_running_loop().time()
    _ours.put(patch, Ours(positions, tuple(now + wait for wait in waits), wake, moved))


take = _ours.take  # the ledger of the cycle whose patch this is; None for any other (or none told)


def stock(delays: Sequence[float], ours: Ours) -> list[float]:
    """Kopf's delays without ours, by position; all of them if the list is not as expected."""
    count = len(ours.positions)
    if count > len(delays):
        return list(delays)  # not the list we know: keep every delay (Kopf then sleeps and touches)
    head, tail = delays[:len(delays) - count], delays[len(delays) - count:]
    return [*head, *(delay for delay, mine in zip(tail, ours.positions, strict=True) if not mine)]


__all__ = ["Ours", "PerPatch", "stock", "take", "tell"]
