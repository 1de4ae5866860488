"""
Virtual time for the histories: Kopf's and kopf-outcomes' "now" (``datetime.datetime.now`` and the
event loop's time) moves only when the history lets time pass, or when Kopf sleeps (between a delay
and its touch-patch, waiting for its own write): that time passes at once instead of being waited
for. The histories are thus as deterministic as their draws.
"""
from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import Iterator
from typing import Any

_REAL = datetime.datetime
_START = _REAL(2026, 1, 1, tzinfo=datetime.timezone.utc)


class _Meta(type(_REAL)):  # type: ignore[misc]
    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, _REAL)  # a real datetime is still a datetime to everyone

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, _REAL)


class Clock:
    def __init__(self) -> None:
        self.seconds = 0.0

    def now(self, tz: datetime.tzinfo | None = None) -> datetime.datetime:
        moment = _START + datetime.timedelta(seconds=self.seconds)
        return moment.astimezone(tz) if tz is not None else moment.replace(tzinfo=None)

    def advance(self, seconds: float) -> None:
        self.seconds += max(0.0, seconds)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        clock = self

        class VirtualDateTime(_REAL, metaclass=_Meta):
            @classmethod
            def now(cls, tz: datetime.tzinfo | None = None) -> datetime.datetime:  # type: ignore[override]
                return clock.now(tz)

            @classmethod
            def utcnow(cls) -> datetime.datetime:  # type: ignore[override]
                return clock.now()

        datetime.datetime = VirtualDateTime  # type: ignore[misc]
        try:
            yield
        finally:
            datetime.datetime = _REAL  # type: ignore[misc]

    def loop(self) -> asyncio.AbstractEventLoop:
        """An event loop on this clock: where it would wait for a timer, the time passes at once
        (nothing else happens meanwhile: the fake API server has no sockets)."""
        clock = self

        class VirtualLoop(asyncio.SelectorEventLoop):
            def time(self) -> float:
                return clock.seconds

        loop = VirtualLoop()
        select = loop._selector.select  # type: ignore[attr-defined]

        def fast_forward(timeout: float | None = None) -> Any:
            ready = select(0)
            if not ready and timeout is not None and timeout > 0:
                clock.advance(timeout)
            return ready
        loop._selector.select = fast_forward  # type: ignore[attr-defined]
        return loop
