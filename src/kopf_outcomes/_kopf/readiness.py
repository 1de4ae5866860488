"""
Kopf's wait for a set of toggles (``aiotoggles.ToggleSet.wait_for``), with one waiter on the set's
condition instead of one per task: each object's toggle woke every waiting worker, so a start with an
index was quadratic in the watched objects, in stock Kopf too (benchmarks/README.md, scenario 9).
The first task waits on the condition as Kopf's does; the others wait for it, then look again, and one
leads if the state does not hold. What the wait means is Kopf's (``tox -e parity``).
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
