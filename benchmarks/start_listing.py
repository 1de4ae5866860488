"""
The operator's start with N indexed objects, in process (no API server): Kopf's real watcher and
``process_resource_event`` over a listing of N ConfigMaps (ten per parent, as in the ``wakeups``
scenario), up to the last object's event processed. Every object's worker waits there until the
operator's indices are listed: what made the start quadratic (issue 43, ``_kopf/readiness.py``).

    python -m benchmarks.start_listing ours 1000 2000 4000     # with kopf-outcomes installed
    python -m benchmarks.start_listing stock 1000 2000         # stock Kopf, with a plain kopf.index
    python -m benchmarks.start_listing ours 2000 --profile     # and the top of a cProfile

Each size runs in a fresh process (Kopf's registry and the patch are process-wide).
"""
from __future__ import annotations

import asyncio
import cProfile
import functools
import io
import pstats
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

PARENT = "example.com/parent"


def _listing(count: int, *, as_served: bool = False) -> Any:
    """``as_served``: each body as the API server serves it, with its creation time and managed fields."""
    from kopf._cogs.clients import watching

    def served() -> dict[str, Any]:
        return {"creationTimestamp": "2026-12-06T08:00:00Z", "managedFields": [{
            "manager": "python", "operation": "Update", "apiVersion": "v1", "time": "2026-12-06T08:00:00Z",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:state": {}},
                                                   "f:metadata": {"f:labels": {".": {}, f"f:{PARENT}": {}}}}}]}

    async def infinite_watch(**_: Any) -> AsyncIterator[Any]:
        for i in range(count):
            yield {"type": None, "object": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"state": "running"},
                                            "metadata": {"name": f"p-{i // 10:05d}-c{i % 10}", "namespace": "ns",
                                                         "uid": f"uid-{i}", "resourceVersion": "1",
                                                         "labels": {PARENT: f"p-{i // 10:05d}"},
                                                         **(served() if as_served else {})}}}
        yield watching.Bookmark.LISTED
        await asyncio.Event().wait()
    watching.infinite_watch = infinite_watch


def _register(side: str) -> None:
    import kopf
    if side == "ours":
        import kopf_outcomes
        kopf_outcomes.install(entry_points=False, events=False)
        children = kopf_outcomes.selected("v1", "configmaps", labels={PARENT: "{metadata.name}"}, fields=["data.state"])
        kopf_outcomes.depends_on_objects(children)(kopf.on.delete("kopf.dev", "v1", "kopfexamples")(lambda **_: None))
    else:
        kopf.index("v1", "configmaps", labels={PARENT: kopf.PRESENT})(
            lambda body, **_: {body["metadata"]["labels"][PARENT]: body["metadata"]["name"]})


async def _start(count: int, *, indexed_resource: bool = True, settings: Any = None,
                 settled: Callable[[], Awaitable[None]] | None = None) -> float:
    """Seconds from the watcher's start until every object's event was processed; then ``settled``
    runs while the watcher and its indices still live (``indexed_resource``: False where no handler
    indexes the resource, so that Kopf does not hold its workers until it is listed)."""
    import kopf
    from kopf._cogs.aiokits import aiotoggles
    from kopf._cogs.structs import ephemera, references
    from kopf._core.actions import lifecycles
    from kopf._core.engines import indexing
    from kopf._core.reactor import inventory, processing, queueing

    resource = references.Resource("", "v1", "configmaps", kind="ConfigMap", namespaced=True,
                                   verbs=["list", "watch", "patch"])
    registry, settings = kopf.get_default_registry(), settings or kopf.OperatorSettings()
    indexers, memories = indexing.OperatorIndexers(), inventory.ResourceMemories()
    indexers.ensure(registry._indexing.get_all_handlers())
    processed, finished = 0, asyncio.Event()
    memobase, event_queue = ephemera.Memo(), asyncio.Queue[Any]()  # one per operator, as Kopf's own

    async def processor(**kwargs: Any) -> None:
        nonlocal processed
        await processing.process_resource_event(
            lifecycle=lifecycles.all_at_once, registry=registry, settings=settings, indexers=indexers,
            memories=memories, memobase=memobase, event_queue=event_queue, resource=resource, **kwargs)
        processed += 1
        if processed == count:
            finished.set()

    indexed = aiotoggles.ToggleSet(all)
    blocker = await indexed.make_toggle(name="orchestration blocker")
    started = time.perf_counter()
    watcher = asyncio.create_task(queueing.watcher(
        namespace="ns", settings=settings, resource=resource, processor=functools.partial(processor),
        operator_indexed=indexed,
        resource_indexed=await indexed.make_toggle(name="configmaps") if indexed_resource else None))
    await indexed.drop_toggle(blocker)
    await finished.wait()
    took = time.perf_counter() - started
    if settled is not None:
        await settled()
    watcher.cancel()
    await asyncio.gather(watcher, return_exceptions=True)
    return took


def _one(side: str, count: int, profile: bool) -> None:
    _listing(count)
    _register(side)
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    took = asyncio.run(_start(count))
    print(f"{side}: {count} objects listed and processed in {took:.2f} s ({took / count * 1e3:.2f} ms each)",
          flush=True)
    if profiler is not None:
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
        print(out.getvalue())


def main(argv: list[str]) -> None:
    profile = "--profile" in argv
    side, *sizes = [arg for arg in argv if arg != "--profile"]
    if side not in ("ours", "stock") or not sizes:
        raise SystemExit(__doc__)
    if len(sizes) == 1:
        return _one(side, int(sizes[0]), profile)
    for size in sizes:
        subprocess.run([sys.executable, "-m", "benchmarks.start_listing", side, size,
                        *(["--profile"] if profile else [])], check=True)
    return None


if __name__ == "__main__":
    main(sys.argv[1:])
