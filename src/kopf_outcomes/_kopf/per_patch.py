"""
A value told to the ``apply()`` of one reaction cycle, keyed to that cycle's own patch object.

A cycle decides things its ``apply()`` must know (which delays are ours, what a held cycle may
write). Kopf hands ``apply()`` the very patch object the cycle filled, so the value is keyed to
that object by identity: it reaches that ``apply()`` whichever task runs it (a tool may run the
cycle in a task of its own, where a context variable set inside would not come back), and no other
``apply()`` can take it. Held weakly where the patch allows it (Kopf's ``Patch`` does): a cycle
that never reaches ``apply()`` leaves nothing behind once its patch is gone.
"""
from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["PerPatch"]

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
