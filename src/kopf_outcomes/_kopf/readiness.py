"""
Kopf's wait for a set of toggles (``aiotoggles.ToggleSet.wait_for``), with one waiter on the
set's condition instead of one per task.

At the start, every object's worker waits until the operator's indices are listed
(``operator_indexed.wait_for(True)``), and the creation of each object's toggle in that set (by
the watcher) and its dropping (by the worker) notify the set's condition: each notification woke
every worker that waits, each in turn under the condition's lock. The start was quadratic in the
watched objects, in stock Kopf too as soon as it has an index: 6 s for 1,000 indexed objects, 33 s
for 2,000, 175 s for 4,000 (benchmarks/README.md, scenario 9). Here the first task that waits for
a state waits on the condition, as Kopf's does (a task that waits alone waits exactly as in Kopf);
the others wait until it returns, then each looks again (it returns only when the state holds),
and one of them leads if it does not: a notification wakes one task, whatever the number of objects.
What the wait means is Kopf's, unchanged (Kopf's own tests of toggle sets and of the blocking until
indexed pass with it: ``tox -e parity``); only the needless wake-ups are gone.
"""
from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

WaitFor = Callable[[Any, bool], Awaitable[None]]


def wrap(original: WaitFor) -> WaitFor:
    """Kopf's ``ToggleSet.wait_for``: returns once the set's state is ``state``."""
    leaders: weakref.WeakKeyDictionary[Any, dict[bool, asyncio.Future[None]]] = weakref.WeakKeyDictionary()

    async def wait_for(self: Any, state: bool, /) -> None:
        state = bool(state)
        by_state = leaders.setdefault(self, {})
        while True:
            led = by_state.get(state)
            if led is None:  # the first one waits as Kopf does, on the condition (alone: exactly Kopf's)
                led = by_state[state] = asyncio.get_running_loop().create_future()
                try:
                    return await original(self, state)
                finally:  # done, failed or cancelled: the others look again, and one of them leads
                    if by_state.get(state) is led:
                        del by_state[state]
                    led.set_result(None)
            if self.is_on() == state:
                return
            await asyncio.shield(led)  # one cancelled here leaves the leader waiting for the others
    return wait_for
