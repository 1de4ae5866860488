"""An operator file run as a process that may be killed and restarted; exits nobody caused are counted."""
from __future__ import annotations

from collections.abc import Callable

from kopf_outcomes_testing.process import OperatorProcess


class Operators:
    """One operator file, started, killed and restarted; counts the exits nobody caused."""

    def __init__(self, make: Callable[[], OperatorProcess]) -> None:
        self.make = make
        self.current: OperatorProcess | None = None
        self.all: list[OperatorProcess] = []
        self.kills = 0
        self.unexpected_exits: list[int] = []

    @property
    def up(self) -> bool:
        return self.current is not None

    async def start(self) -> OperatorProcess:
        self.check()
        op = self.make()
        self.all.append(op)
        await op.start()
        self.current = op
        return op

    async def ensure_up(self) -> None:
        """Restart after an exit that no kill caused (counted), so that the rest is still measured."""
        self.check()
        if self.current is None:
            await self.start()

    def kill(self) -> None:
        self.check()
        if self.current is not None:
            self.current.kill()
            self.kills += 1
            self.current = None

    def check(self) -> None:
        """Count an exit of the current operator that no kill caused."""
        process = self.current._process if self.current is not None else None
        if process is not None and process.poll() is not None:
            self.unexpected_exits.append(process.returncode)
            self.current = None

    def stop(self) -> None:
        self.check()
        if self.current is not None:
            self.current.stop()
            self.current = None

    def text(self) -> str:
        return "\n".join(op.text() for op in self.all)

    def pid(self) -> int:
        assert self.current is not None and self.current._process is not None
        return self.current._process.pid
