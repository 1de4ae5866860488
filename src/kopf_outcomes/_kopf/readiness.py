"""
Kopf's wait for a set of toggles (``aiotoggles.ToggleSet.wait_for``), with one waiter on the
set's condition instead of one per task.

At the start, every object's worker waits until the operator's indices are listed
(``operator_indexed.wait_for(True)``), and the creation of each object's toggle in that set (by
the watcher) and its dropping (by the worker) notify the set's condition: each notification woke
every worker that waits, each in turn under the condition's lock. The start was quadratic in the
watched objects, in stock Kopf too as soon as it has an index: 6 s for 1,000 indexed objects, 33 s
for 2,000, 175 s for 4,000 (benchmarks/README.md, scenario 9). Here the first task that waits for a state waits on the
condition; the others wait for it, and each looks again when it is woken (it returns only when the
state holds, as Kopf's does): a notification wakes one task, whatever the number of objects.
What the wait means is Kopf's, unchanged (Kopf's own tests of toggle sets and of the blocking until
indexed pass with it: ``tox -e parity``); only the needless wake-ups are gone.
"""
from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

WaitFor = Callable[[Any, bool], Awaitable[None]]


class _Gate:
    """The one wait on a set's condition for one state, and the tasks that wait for it."""

    def __init__(self, waiting: Awaitable[None]) -> None:
        self.task = asyncio.ensure_future(waiting)
        self.waiters = 0


def wrap(original: WaitFor) -> WaitFor:
    """Kopf's ``ToggleSet.wait_for``: returns once the set's state is ``state``."""
    gates: weakref.WeakKeyDictionary[Any, dict[bool, _Gate]] = weakref.WeakKeyDictionary()

    async def wait_for(self: Any, state: bool, /) -> None:
        state = bool(state)
        while self.is_on() != state:
            by_state = gates.setdefault(self, {})
            gate = by_state.get(state)
            if gate is None or gate.task.done():
                gate = by_state[state] = _Gate(original(self, state))
            gate.waiters += 1
            try:
                await asyncio.shield(gate.task)
            finally:
                gate.waiters -= 1
                if not gate.waiters and not gate.task.done():
                    gate.task.cancel()  # the last one waiting was cancelled: no wait is left behind,
                    if by_state.get(state) is gate:  # and none that comes meanwhile is handed one cancelled
                        del by_state[state]
    return wait_for
