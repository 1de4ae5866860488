"""
What the objects look like, as a watch sees them: Kopf's progress records, and a mirror of
one namespace that the scenarios poll in memory (no API calls while they wait).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import aiohttp
from kubernetes_asyncio import client, watch

from benchmarks.common import FINALIZER, GROUP, HANDLER_ID, PLURAL, VERSION
from benchmarks.retries import Retries, call, cause


def handler_progress(body: Mapping[str, Any], handler_id: str = HANDLER_ID) -> Mapping[str, Any] | None:
    """Kopf's progress record of a handler: in ``status.kopf.progress`` or in an annotation."""
    progress = ((body.get("status") or {}).get("kopf") or {}).get("progress") or {}
    record = progress.get(handler_id)
    if isinstance(record, Mapping):
        return record
    raw = ((body.get("metadata") or {}).get("annotations") or {}).get(f"kopf.zalando.org/{handler_id}")
    if raw:
        with contextlib.suppress(ValueError):
            parsed = json.loads(raw)
            if isinstance(parsed, Mapping):
                return parsed
    return None


def has_finalizer(body: Mapping[str, Any]) -> bool:
    return FINALIZER in ((body.get("metadata") or {}).get("finalizers") or [])


def is_waiting(body: Mapping[str, Any]) -> bool:
    """Deleting, and its deletion handler has run at least once without finishing."""
    if not (body.get("metadata") or {}).get("deletionTimestamp"):
        return False
    record = handler_progress(body)
    return bool(record and not record.get("success") and not record.get("failure")
                and int(record.get("retries") or 0) >= 1)


class Mirror:
    """
    The objects of one namespace as a watch sees them, and when each one was gone.

    The watch is restarted where it stopped when its connection fails (counted in the client's
    ``retries``, when it has one); a restart that fails again and again ends in ``error``.
    """

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.bodies: dict[str, Mapping[str, Any]] = {}
        self.gone: dict[str, float] = {}  # name -> time.monotonic() of the DELETED event
        self.version = ""
        self._task: asyncio.Task[None] | None = None
        self.error: BaseException | None = None

    @property
    def retries(self) -> Retries:
        return getattr(self.api, "retries", None) or Retries()

    async def __aenter__(self) -> Mirror:
        await self._list()
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _list(self) -> None:
        """(Re)load the namespace; objects missing from a re-list are gone since the last event."""
        objects = client.CustomObjectsApi(self.api)
        listing = await objects.list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL)
        moment = time.monotonic()
        bodies = {item["metadata"]["name"]: item for item in listing["items"]}
        for name in set(self.bodies) - set(bodies):
            self.gone.setdefault(name, moment)
        self.bodies = bodies
        self.version = listing["metadata"]["resourceVersion"]

    async def _run(self) -> None:
        try:
            while True:  # each round ends when the stream failed after some progress
                await call(self._follow, what=f"the watch of {self.namespace}", retries=self.retries)
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            self.error = e
            raise

    async def _follow(self) -> None:
        """Stream events from ``self.version``; fail (to be retried) only if none came."""
        progressed = False
        stream = watch.Watch()
        objects = client.CustomObjectsApi(self.api)
        try:
            async for event in stream.stream(
                objects.list_namespaced_custom_object, GROUP, VERSION, self.namespace, PLURAL,
                resource_version=self.version, allow_watch_bookmarks=True,
            ):
                moment = time.monotonic()
                progressed = True
                kind, body = event["type"], event["raw_object"]
                self.version = body["metadata"]["resourceVersion"]
                if kind == "BOOKMARK":
                    continue
                name = body["metadata"]["name"]
                if kind == "DELETED":
                    self.bodies.pop(name, None)
                    self.gone.setdefault(name, moment)
                else:
                    self.bodies[name] = body
        except client.ApiException as e:
            if e.status != 410:  # 410: the version is too old to resume from: list again
                self._restart_or_raise(e, progressed)
            await self._list()
        except (aiohttp.ClientError, ConnectionError, asyncio.TimeoutError) as e:
            self._restart_or_raise(e, progressed)
        finally:
            with contextlib.suppress(Exception):
                await stream.close()

    def _restart_or_raise(self, error: BaseException, progressed: bool) -> None:
        why = cause(error)
        if why is None or not progressed:
            raise error  # not retryable, or retried by call() within its budget
        self.retries.record(why, 0.0)  # resumed at once, with a fresh budget

    def count(self, predicate: Callable[[Mapping[str, Any]], bool], names: Iterable[str]) -> int:
        return sum(1 for name in names if name in self.bodies and predicate(self.bodies[name]))

    async def wait(self, check: Callable[[], bool], *, timeout: float, what: str,
                   alive: Callable[[], None] = lambda: None) -> None:
        """Poll an in-memory condition (cheap: no API calls) until it holds."""
        deadline = time.monotonic() + timeout
        while not check():
            if self.error is not None:
                raise RuntimeError(f"the watch of {self.namespace} failed: "
                                   f"{type(self.error).__name__}: {str(self.error).strip()}")
            alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
            await asyncio.sleep(0.05)

    async def wait_all(self, predicate: Callable[[Mapping[str, Any]], bool], names: Sequence[str],
                       *, timeout: float, what: str, alive: Callable[[], None] = lambda: None) -> None:
        pending = set(names)

        def check() -> bool:
            done = {n for n in pending if n in self.bodies and predicate(self.bodies[n])}
            pending.difference_update(done)
            return not pending

        await self.wait(check, timeout=timeout, alive=alive,
                        what=f"{what} ({len(names)} objects; {len(pending)} left)")

    async def wait_gone(self, names: Sequence[str], *, timeout: float, what: str,
                        alive: Callable[[], None] = lambda: None) -> None:
        await self.wait(lambda: all(n in self.gone for n in names), timeout=timeout, alive=alive,
                        what=what)
