"""
What a watched object costs in memory, in process (no API server; issue 43): the ``start_listing``
listing of N labelled ConfigMaps (ten per parent) through Kopf's real watcher and
``process_resource_event``, then the operator's RSS once the workers are idle and after a gc.
Three sides, each registering the ``wakeups`` operators' handler for waiting children (which
makes Kopf watch every ConfigMap; none of these children carries its label):

- ``stock``: stock Kopf, the children watched and not indexed (stock's ``wakeups`` operator);
- ``stock-index``: stock Kopf with a plain ``kopf.index`` of what an operator that waits on its
  children keeps: parent → (name, ``data.state``);
- ``ours``: kopf-outcomes with the ``wakeups`` operator's ``depends_on_objects(selected(...))``.

    python -m benchmarks.rss_per_object 1000 2000 5000     # each side, each size: RSS and per object
    python -m benchmarks.rss_per_object 5000 --diff        # and tracemalloc: ours - stock-index, by file
    python -m benchmarks.rss_per_object 5000 --served      # each body as the API server serves it

Each side and size runs in a fresh process. The stock sides wait for Kopf's indices with
kopf-outcomes' one waiter (``_kopf/readiness.py``): stock Kopf's own start is quadratic with an
index (388 s at 5,000 objects); the wait keeps nothing per object once the listing is processed.
"""
from __future__ import annotations

import asyncio
import ctypes
import gc
import json
import os
import subprocess
import sys
import tempfile
import tracemalloc
from typing import Any

import psutil

from benchmarks import start_listing

SIDES = ("stock", "stock-index", "ours")
WAITS = "example.com/waits"
MIB = 1024 * 1024


def _register(side: str) -> None:
    import kopf
    from kopf._cogs.aiokits import aiotoggles

    from kopf_outcomes._kopf import readiness
    kopf.on.create("v1", "configmaps", labels={WAITS: "yes"})(lambda **_: None)
    if side == "ours":
        start_listing._register("ours")
        return
    aiotoggles.ToggleSet.wait_for = readiness.wrap(aiotoggles.ToggleSet.wait_for)  # type: ignore[method-assign]
    if side == "stock-index":
        kopf.index("v1", "configmaps", labels={start_listing.PARENT: kopf.PRESENT})(
            lambda body, **_: {body["metadata"]["labels"][start_listing.PARENT]:
                               (body["metadata"]["name"], body.get("data", {}).get("state"))})


async def _idle() -> None:
    """Until every object's worker has ended (Kopf's queueing idle timeout) and a gc ran."""
    for _ in range(100):  # at most 20 s
        if len(asyncio.all_tasks()) < 10:  # this one, the watcher and its own few
            break
        await asyncio.sleep(0.2)
    gc.collect()


def _hold_at_listed(count: int, path: str) -> None:
    """Snapshot the traced memory while every object's worker holds its event, just before the
    listing ends (where Kopf holds the workers until the indices are listed: the peak)."""
    from kopf._cogs.clients import watching
    listing = watching.infinite_watch

    async def infinite_watch(**kwargs: Any) -> Any:
        async for event in listing(**kwargs):
            if event is watching.Bookmark.LISTED:
                for _ in range(100):  # at most 20 s for the workers to start
                    if len(asyncio.all_tasks()) > count:
                        break
                    await asyncio.sleep(0.2)
                await asyncio.sleep(0.5)
                tracemalloc.take_snapshot().dump(path)
            yield event
    watching.infinite_watch = infinite_watch


def _one(side: str, count: int, trace: str | None, served: bool) -> None:
    process = psutil.Process()
    start_listing._listing(count, as_served=served)
    _register(side)
    if trace:
        _hold_at_listed(count, trace + ".held")
    import kopf
    gc.collect()
    figures: dict[str, Any] = {"side": side, "count": count, "idle_mib": process.memory_info().rss / MIB}
    if trace:
        tracemalloc.start(1)

    async def settled() -> None:
        figures["listed_mib"] = process.memory_info().rss / MIB
        await _idle()
        figures["settled_mib"] = process.memory_info().rss / MIB
        if trace:
            figures["traced_mib"], figures["traced_peak_mib"] = (size / MIB for size in tracemalloc.get_traced_memory())
            tracemalloc.take_snapshot().dump(trace)
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # what of the settled RSS is free memory the allocator kept
        figures["trimmed_mib"] = process.memory_info().rss / MIB

    settings = kopf.OperatorSettings()
    settings.queueing.idle_timeout = 1.0  # the workers end sooner than Kopf's 5 s: the same state, earlier
    figures["seconds"] = asyncio.run(start_listing._start(
        count, indexed_resource=side != "stock", settled=settled, settings=settings))
    print(json.dumps(figures), flush=True)


def _run(side: str, count: int, served: bool, trace: str = "") -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "benchmarks.rss_per_object", "--one", side, str(count),
                          "served" if served else "bare", trace], check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out.splitlines()[-1]))


def _diff(count: int, served: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        before, after = os.path.join(tmp, "stock-index"), os.path.join(tmp, "ours")
        for side, path in (("stock-index", before), ("ours", after)):
            print(f"traced, {side}, {count} objects: {_run(side, count, served, path)}", flush=True)
        for moment, suffix in (("settled", ""), ("held until listed", ".held")):
            old, new = tracemalloc.Snapshot.load(before + suffix), tracemalloc.Snapshot.load(after + suffix)
            for key in ("filename", "lineno"):
                print(f"\n{moment}: ours - stock-index at {count} objects, by {key} (bytes per object;"
                      f" traced: {sum(s.size for s in old.statistics('filename')) / count:.0f}"
                      f" -> {sum(s.size for s in new.statistics('filename')) / count:.0f} per object):")
                for stat in new.compare_to(old, key)[:10]:
                    print(f"  {stat.size_diff / count:8.0f}  {stat.count_diff / count:6.2f} blocks  {stat.traceback}")
            print(f"\n{moment}: stock-index alone at {count} objects, by line (bytes per object):")
            for stat in old.statistics("lineno")[:12]:
                print(f"  {stat.size / count:8.0f}  {stat.count / count:6.2f} blocks  {stat.traceback}")


def main(argv: list[str]) -> None:
    if argv[:1] == ["--one"]:
        return _one(argv[1], int(argv[2]), argv[4] or None, argv[3] == "served")
    diff, served = "--diff" in argv, "--served" in argv
    sizes = [int(arg) for arg in argv if not arg.startswith("--")]
    if not sizes:
        raise SystemExit(__doc__)
    print(f"load: {os.getloadavg()}", flush=True)
    for side in SIDES:
        rows = [_run(side, count, served) for count in sizes]
        for row, previous in zip(rows, [None, *rows], strict=False):
            slope = "" if previous is None else (
                f"; {(row['settled_mib'] - previous['settled_mib']) * MIB / (row['count'] - previous['count']) / 1024:.1f}"
                f" KiB per object since {previous['count']}")
            print(f"{side:12} {row['count']:6}: idle {row['idle_mib']:.1f} MiB, listed {row['listed_mib']:.1f} MiB,"
                  f" settled {row['settled_mib']:.1f} MiB{slope}, after malloc_trim {row['trimmed_mib']:.1f} MiB"
                  f" ({row['seconds']:.1f} s)", flush=True)
    if diff:
        _diff(max(sizes), served)
    print(f"load: {os.getloadavg()}", flush=True)
    return None


if __name__ == "__main__":
    main(sys.argv[1:])
