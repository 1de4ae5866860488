"""
What a process remembers of objects it has seen, bounded: the least recently remembered is
forgotten first, so that memory stays flat however many objects pass.
"""
from __future__ import annotations

import collections
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


def remember(cache: collections.OrderedDict[K, V], key: K, value: V, limit: int) -> None:
    """Keep ``value`` under ``key`` as the most recent entry; forget the oldest beyond ``limit``."""
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > limit:
        cache.popitem(last=False)
