"""
An API fault proxy on loopback, between an operator and kube-apiserver.

The operator talks plain HTTP to 127.0.0.1 (its kubeconfig from :meth:`FaultProxy.kubeconfig`);
the proxy talks TLS to the API server, verified with the cluster's CA, and passes the operator's
own credentials through. At a seeded rate, a PATCH is answered with a fault instead: a reset
connection, a stall before it goes through, a reset after it was applied (the answer is lost), or
a 429/500/503/409 (a 409 with a real concurrent write of the object, as a conflict has). Watch
streams pass through, and some are broken off after a while.
A test may also aim a fault at the next PATCH of a named object (``forced``), or act the moment the
API server has applied a PATCH, before the operator hears of it (``on_applied``: a kill there).
"""
from __future__ import annotations

import asyncio
import json
import random
import ssl
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import aiohttp
from aiohttp import web

FAULTS = ("reset", "stall", "lost_answer", "429", "500", "503", "409")
_HOP_BY_HOP = {"host", "connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding",
               "upgrade", "te", "trailer", "proxy-authorization", "proxy-connection"}


class FaultProxy:
    def __init__(self, upstream: str, ca_path: Path, rng: random.Random, *, patch_rate: float,
                 watch_break_rate: float, stall: tuple[float, float] = (2.0, 8.0)) -> None:
        self.upstream = upstream.rstrip("/")
        self.ssl = ssl.create_default_context(cafile=str(ca_path))
        self.rng = rng
        self.patch_rate = patch_rate
        self.watch_break_rate = watch_break_rate
        self.stall = stall
        self.counts: Counter[str] = Counter()
        self.forced: dict[str, str] = {}  # object name -> the fault for its next PATCH
        self.on_applied: Callable[[str, bytes], None] | None = None  # (path, body) of an applied PATCH
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.url = ""

    async def __aenter__(self) -> FaultProxy:
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self.ssl),
                                              timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
                                              auto_decompress=False)
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=2)  # open watches: no 60 s wait
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def kubeconfig(self, path: Path, token: str) -> Path:
        """A kubeconfig for the operator: this proxy as the server, the given bearer token."""
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "proxy",
            "clusters": [{"name": "proxy", "cluster": {"server": self.url}}],
            "users": [{"name": "admin", "user": {"token": token}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "admin"}}],
        }
        path.write_text(json.dumps(config))
        return path

    async def _concurrent_write(self, request: web.Request) -> None:
        """What makes a 409 real: someone else wrote the object. Under a Kopf-managed prefix, so
        that the write is no state any handler depends on: the figure stays about the conflict."""
        assert self._session is not None
        path = request.path[: -len("/status")] if request.path.endswith("/status") else request.path
        headers = {"Authorization": request.headers.get("Authorization", ""),
                   "Content-Type": "application/merge-patch+json"}
        patch = {"metadata": {"annotations": {"chaos.kopf.zalando.org/conflict": str(self.counts["409"])}}}
        async with self._session.patch(self.upstream + path, headers=headers, data=json.dumps(patch)) as answer:
            await answer.read()
        self.counts["concurrent_writes"] += 1

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        fault = None
        name = request.path.rstrip("/").rsplit("/", 1)[-1]
        if request.method == "PATCH" and name in self.forced:
            fault = self.forced.pop(name)
            self.counts[f"forced_{fault}"] += 1
        elif request.method == "PATCH" and self.rng.random() < self.patch_rate:
            fault = self.rng.choice(FAULTS)
            self.counts[fault] += 1
            self.counts["patches_faulted"] += 1
        elif request.method == "PATCH":
            self.counts["patches_passed"] += 1
        if fault == "409":  # a real conflict comes with a concurrent write, and so with a new event
            await self._concurrent_write(request)
        if fault in ("429", "500", "503", "409"):
            return _status(int(fault))
        if fault == "reset":
            return _reset(request)
        if fault == "stall":
            await asyncio.sleep(self.rng.uniform(*self.stall))
        watch = request.query.get("watch") in ("true", "1")
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        async with self._session.request(request.method, self.upstream + request.path_qs, headers=headers,
                                         data=body or None) as upstream:
            response_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP}
            if fault == "lost_answer":
                await upstream.read()  # applied by the API server; the operator never learns it
                return _reset(request)
            if not watch:
                answer = await upstream.read()
                if request.method == "PATCH" and self.on_applied is not None:
                    self.on_applied(request.path, body)
                return web.Response(status=upstream.status, headers=response_headers, body=answer)
            response = web.StreamResponse(status=upstream.status, headers=response_headers)
            await response.prepare(request)
            lifetime = self.rng.uniform(1.0, 10.0) if self.rng.random() < self.watch_break_rate else None
            try:
                await asyncio.wait_for(_pump(upstream, response), timeout=lifetime)
            except asyncio.TimeoutError:
                self.counts["watches_broken"] += 1
                return _reset(request)
            return response


async def _pump(upstream: aiohttp.ClientResponse, response: web.StreamResponse) -> None:
    async for chunk in upstream.content.iter_any():
        await response.write(chunk)
    await response.write_eof()


def _status(code: int) -> web.Response:
    reasons = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 409: "Conflict"}
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reasons[code],
              "message": f"chaos: an injected {code}"}
    headers = {"Retry-After": "1"} if code in (429, 503) else {}
    return web.json_response(status, status=code, headers=headers)


def _reset(request: web.Request) -> web.Response:
    if request.transport is not None:
        request.transport.abort()
    return web.Response(status=500)  # never sent: the connection is gone
