"""The external system of the chaos suite: records every start with its idempotency key."""
from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import defaultdict
from collections.abc import Callable

from aiohttp import web


@dataclasses.dataclass(frozen=True)
class Start:
    operator: str
    name: str
    key: str
    time: float


class ExternalSystem:
    """Records every start with its idempotency key; ``on_start`` may act at that very moment."""

    def __init__(self, answer_after: float = 0.0) -> None:
        self.starts: list[Start] = []
        self.answer_after = answer_after
        self.on_start: Callable[[Start], None] | None = None
        self._runner: web.AppRunner | None = None

    async def _start(self, request: web.Request) -> web.Response:
        data = await request.json()
        start = Start(str(data["operator"]), str(data["name"]), str(data["key"]), time.monotonic())
        duplicate = any(s.key == start.key and s.operator == start.operator for s in self.starts)
        self.starts.append(start)
        if self.on_start is not None:
            self.on_start(start)
        await asyncio.sleep(self.answer_after)
        return web.json_response({"started": not duplicate})

    async def __aenter__(self) -> str:
        app = web.Application()
        app.router.add_post("/start", self._start)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        return f"http://{host}:{port}"

    async def __aexit__(self, *_: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def started(self, name: str, operator: str = "main") -> bool:
        return any(s.name == name and s.operator == operator for s in self.starts)

    def per_object(self, operator: str = "main") -> dict[str, tuple[int, int]]:
        """name -> (raw starts, distinct idempotency keys)."""
        raw: dict[str, int] = defaultdict(int)
        keys: dict[str, set[str]] = defaultdict(set)
        for s in self.starts:
            if s.operator == operator:
                raw[s.name] += 1
                keys[s.name].add(s.key)
        return {name: (raw[name], len(keys[name])) for name in raw}
