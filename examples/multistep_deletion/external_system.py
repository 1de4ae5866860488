"""
A simulated external system with an HTTP API, for the seed story's demo and tests.

``POST /start`` with ``{"namespace", "name"}`` starts "work"; after ``delay`` seconds the
system calls back by patching the object with :func:`kopf_outcomes.client.signal`, either
``status.deletion.state = "done"`` (status subresource) or the annotation
``example.com/deletion: done``. ``GET /starts`` lists what was started, for the tests.

    python -m examples.multistep_deletion.external_system --port 8088 --delay 3 --via status
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import time
from typing import Any, Literal

import aiohttp
import kopf
from aiohttp import web

from kopf_outcomes.client import signal

CALLBACK_ANNOTATION = "example.com/deletion"
Via = Literal["status", "annotation"]


def callback_done(status: kopf.Status, annotations: kopf.Annotations) -> bool:
    """Whether the external system has called back for this object."""
    state = (status.get("deletion") or {}).get("state")
    return state == "done" or annotations.get(CALLBACK_ANNOTATION) == "done"


async def start_external_deletion(namespace: str, name: str, request_id: str | None = None) -> None:
    """
    The operator's side: ask the external system (at $EXTERNAL_SYSTEM_URL) to start. A request
    with the ``request_id`` of an earlier one starts nothing new (a repeat after a crash).
    """
    url = os.environ["EXTERNAL_SYSTEM_URL"]
    request = {"namespace": namespace, "name": name, "request_id": request_id}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}/start", json=request) as rsp:
            rsp.raise_for_status()


@dataclasses.dataclass
class ExternalSystem:
    """The system: records every start request, calls back after ``delay`` (None: only when told
    to), once per ``request_id``."""

    kubeconfig: str | None = None
    delay: float | None = 3.0
    via: Via = "status"
    starts: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    callbacks: dict[tuple[str, str], float] = dataclasses.field(default_factory=dict)
    request_ids: set[str] = dataclasses.field(default_factory=set)
    _tasks: set[asyncio.Task[None]] = dataclasses.field(default_factory=set)

    async def call_back(self, namespace: str, name: str) -> None:
        """Tell the operator that the work for this object is done."""
        # The external system's side only: the operator, which imports this module for
        # `callback_done`, must not load kubernetes-asyncio (it changes how Kopf logs in).
        from kubernetes_asyncio import config

        api = await config.new_client_from_config(config_file=self.kubeconfig)
        async with api:
            fields: dict[str, Any] = (
                {"status": {"deletion": {"state": "done"}}} if self.via == "status"
                else {"annotations": {CALLBACK_ANNOTATION: "done"}}
            )
            await signal(api, group="kopf.dev", version="v1", plural="kopfexamples",
                         namespace=namespace, name=name, **fields)
        self.callbacks[(namespace, name)] = time.monotonic()

    async def _later(self, namespace: str, name: str, delay: float) -> None:
        await asyncio.sleep(delay)
        await self.call_back(namespace, name)

    async def _start(self, request: web.Request) -> web.Response:
        data = await request.json()
        key = (str(data["namespace"]), str(data["name"]))
        self.starts.append(key)
        request_id = data.get("request_id")
        if request_id is not None and request_id in self.request_ids:
            return web.json_response({"started": False, "repeated": request_id})
        if request_id is not None:
            self.request_ids.add(str(request_id))
        if self.delay is not None:
            task = asyncio.create_task(self._later(*key, self.delay))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return web.json_response({"started": True})

    async def _list(self, request: web.Request) -> web.Response:
        return web.json_response([list(key) for key in self.starts])

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/start", self._start)
        app.router.add_get("/starts", self._list)
        return app

    async def serve(self, port: int = 0) -> tuple[web.AppRunner, str]:
        """Serve on 127.0.0.1 (a free port by default); return the runner and the base URL."""
        runner = web.AppRunner(self.app())
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port)
        await site.start()
        host, bound_port = runner.addresses[0][:2]
        return runner, f"http://{host}:{bound_port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8088)
    parser.add_argument("--delay", type=float, default=3.0)
    parser.add_argument("--via", choices=["status", "annotation"], default="status")
    args = parser.parse_args()
    system = ExternalSystem(delay=args.delay, via=args.via)
    web.run_app(system.app(), host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
