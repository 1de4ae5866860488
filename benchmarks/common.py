"""
What every scenario needs: statistics, machine facts, the API client, scratch namespaces that
are cleaned up even on failure, bulk object operations, a watch-fed mirror of the objects, and
operators run as ``kopf run`` subprocesses.
"""
from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import IO, Any, TypeVar

from kubernetes_asyncio import client, config, watch

ROOT = Path(__file__).resolve().parents[1]
GROUP, VERSION, PLURAL = "kopf.dev", "v1", "kopfexamples"
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
MERGE_PATCH = "application/merge-patch+json"
HANDLER_ID = "delete_fn"

T = TypeVar("T")


def say(message: str) -> None:
    """Progress on stderr, so that stdout carries only the table."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- statistics ---------------------------------------------------------------------------------

def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linearly interpolated between the closest ranks."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def distribution(values: Sequence[float]) -> dict[str, Any]:
    """p50/p95/p99, min, max and mean of latencies in seconds; the raw samples too."""
    return {
        "n": len(values),
        "p50_s": percentile(values, 50),
        "p95_s": percentile(values, 95),
        "p99_s": percentile(values, 99),
        "min_s": min(values) if values else math.nan,
        "max_s": max(values) if values else math.nan,
        "mean_s": sum(values) / len(values) if values else math.nan,
        "samples_s": [round(v, 4) for v in values],
    }


def ratio(ours: float | None, stock: float | None) -> float | None:
    """ours / stock (lower is better everywhere in the report); None where undefined."""
    if ours is None or stock is None or stock == 0 or math.isnan(ours) or math.isnan(stock):
        return None
    return ours / stock


# --- facts about the machine and the software -----------------------------------------------------

def machine_info() -> dict[str, Any]:
    meminfo = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else ""
    total_kib = next((int(line.split()[1]) for line in meminfo.splitlines()
                      if line.startswith("MemTotal:")), 0)
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                  if line.startswith("model name")), platform.processor())
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count() or 0
    return {
        "nproc": usable,
        "cpu_model": model,
        "memory_gib": round(total_kib / 1024 / 1024, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "kopf": metadata.version("kopf"),
        "kopf_outcomes": metadata.version("kopf-outcomes"),
        "kubernetes_asyncio": metadata.version("kubernetes_asyncio"),
        "git_commit": _git_commit(),
        "git_modified": _git_modified(),
    }


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _git_modified() -> list[str]:
    """Library files changed in the working tree: what was measured, beyond the commit."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", "src", "examples"], cwd=ROOT,
                             text=True, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return sorted(line[3:] for line in out.splitlines() if line.strip())


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


# --- the API ------------------------------------------------------------------------------------

async def api_client(kubeconfig: str | Path, *, pool: int = 64) -> client.ApiClient:
    """A client with a connection pool big enough for the bulk operations."""
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = pool
    return client.ApiClient(configuration)


async def bounded(items: Iterable[T], fn: Callable[[T], Awaitable[Any]], *, limit: int = 32) -> None:
    """Run ``fn`` over ``items`` with at most ``limit`` at a time; fail on the first error."""
    semaphore = asyncio.Semaphore(limit)

    async def one(item: T) -> None:
        async with semaphore:
            await fn(item)

    await asyncio.gather(*(one(item) for item in items))


async def create_objects(api: client.ApiClient, namespace: str, names: Sequence[str],
                         *, limit: int = 32) -> None:
    objects = client.CustomObjectsApi(api)

    async def create(name: str) -> None:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "KopfExample",
                "metadata": {"name": name}, "spec": {"field": "value"}}
        await objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

    await bounded(names, create, limit=limit)


async def delete_objects(api: client.ApiClient, namespace: str, names: Sequence[str],
                         *, limit: int = 32) -> None:
    """Delete every named object at (nearly) the same moment."""
    objects = client.CustomObjectsApi(api)

    async def delete(name: str) -> None:
        await objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)

    await bounded(names, delete, limit=limit)


async def purge_namespace(api: client.ApiClient, namespace: str) -> None:
    """Leave nothing behind: drop the finalizers of every object, delete them and the namespace."""
    objects = client.CustomObjectsApi(api)
    try:
        listing = await objects.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    except client.ApiException as e:
        if e.status == 404:
            return
        raise

    async def release(item: Mapping[str, Any]) -> None:
        try:
            await objects.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, item["metadata"]["name"],
                {"metadata": {"finalizers": None}},
                _content_type=MERGE_PATCH)  # type: ignore[call-arg]  # not in the client's stubs
        except client.ApiException as e:
            if e.status != 404:
                raise

    await bounded([item for item in listing["items"] if item["metadata"].get("finalizers")],
                  release, limit=32)
    with contextlib.suppress(client.ApiException):
        await objects.delete_collection_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    with contextlib.suppress(client.ApiException):
        await client.CoreV1Api(api).delete_namespace(namespace)


@contextlib.asynccontextmanager
async def scratch_namespace(api: client.ApiClient, prefix: str) -> AsyncIterator[str]:
    """A fresh namespace for one scenario; purged at the end, also on failure."""
    name = f"bench-{prefix}-{uuid.uuid4().hex[:6]}"
    await client.CoreV1Api(api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        try:
            await asyncio.shield(purge_namespace(api, name))
        except Exception as e:  # never hide the scenario's own error behind a cleanup error
            say(f"cleanup of namespace {name} failed: {type(e).__name__}: {e}")


# --- what the objects look like, as seen through a watch ----------------------------------------

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
    """The objects of one namespace as a watch sees them, and when each one was gone."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.bodies: dict[str, Mapping[str, Any]] = {}
        self.gone: dict[str, float] = {}  # name -> time.monotonic() of the DELETED event
        self._task: asyncio.Task[None] | None = None
        self._watch: watch.Watch | None = None
        self.error: BaseException | None = None

    async def __aenter__(self) -> Mirror:
        objects = client.CustomObjectsApi(self.api)
        listing = await objects.list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL)
        for item in listing["items"]:
            self.bodies[item["metadata"]["name"]] = item
        version = listing["metadata"]["resourceVersion"]
        self._task = asyncio.create_task(self._run(version))
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._watch is not None:
            with contextlib.suppress(Exception):
                await self._watch.close()

    async def _run(self, version: str) -> None:
        objects = client.CustomObjectsApi(self.api)
        self._watch = watch.Watch()
        try:
            async for event in self._watch.stream(
                objects.list_namespaced_custom_object, GROUP, VERSION, self.namespace, PLURAL,
                resource_version=version, allow_watch_bookmarks=True,
            ):
                moment = time.monotonic()
                kind, body = event["type"], event["raw_object"]
                if kind == "BOOKMARK":
                    continue
                name = body["metadata"]["name"]
                if kind == "DELETED":
                    self.bodies.pop(name, None)
                    self.gone.setdefault(name, moment)
                else:
                    self.bodies[name] = body
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            self.error = e
            raise

    def count(self, predicate: Callable[[Mapping[str, Any]], bool], names: Iterable[str]) -> int:
        return sum(1 for name in names if name in self.bodies and predicate(self.bodies[name]))

    async def wait(self, check: Callable[[], bool], *, timeout: float, what: str,
                   alive: Callable[[], None] = lambda: None) -> None:
        """Poll an in-memory condition (cheap: no API calls) until it holds."""
        deadline = time.monotonic() + timeout
        while not check():
            if self.error is not None:
                raise RuntimeError(f"the watch of {self.namespace} failed: {self.error!r}")
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


# --- operators as processes ---------------------------------------------------------------------

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class Operator:
    """``kopf run --standalone --namespace NS FILE`` at Kopf's default log level (INFO)."""

    def __init__(self, path: str | Path, namespace: str, *, kubeconfig: str | Path,
                 env: Mapping[str, str] | None = None, label: str = "operator",
                 extra_args: Sequence[str] = ()) -> None:
        self.path = ROOT / path
        self.namespace = namespace
        self.kubeconfig = str(kubeconfig)
        self.env = dict(env or {})
        self.label = label
        self.extra_args = list(extra_args)
        self._log: IO[str] = tempfile.NamedTemporaryFile(
            "w+", prefix=f"bench-{label}-", suffix=".log", delete=False)
        self.process: subprocess.Popen[str] | None = None

    @property
    def log_path(self) -> str:
        return self._log.name

    async def __aenter__(self) -> Operator:
        env = dict(os.environ, KUBECONFIG=self.kubeconfig, PYTHONPATH=str(ROOT),
                   # Plugins installed in this environment stay out: the library alone is measured.
                   KOPF_OUTCOMES_PLUGINS="", **self.env)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kopf", "run", "--standalone", "--namespace", self.namespace,
             *self.extra_args, str(self.path)],
            stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=ROOT, text=True,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()
        if exc[0] is None:
            with contextlib.suppress(OSError):
                os.unlink(self._log.name)
        else:
            say(f"the {self.label} operator's log is kept at {self._log.name}")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"the {self.label} operator exited ({self.process.returncode}):\n"
                               f"{self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        self._log.flush()
        return Path(self._log.name).read_text(errors="replace")[-chars:]

    def status_kib(self, field: str) -> int:
        """A memory figure from /proc/<pid>/status, e.g. VmRSS or VmHWM, in KiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
        raise KeyError(field)

    def cpu_seconds(self) -> float:
        """utime + stime of the process so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS  # fields 14 and 15 of stat(5)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
