"""
The overhead scenario counted in CPU instructions instead of timed: deterministic where time is
not (on a shared machine, a timed ratio moves by more than the 5% a target allows).

Each side (stock Kopf, the floor, ours with the built-ins only, ours with 5 observers; the
subjects of :mod:`.overhead`) runs in its own process under valgrind's callgrind, twice: with
the warm-up runs only, and with ``calls`` runs more. The difference, divided by ``calls``, is
the instructions of one run, without the interpreter's start-up and the imports. Needs
``valgrind`` (Debian: ``apt-get install valgrind``); a process runs about 50 times slower under
it, so the count takes minutes (about 2 in the quick run, 13 in the full one, which counts three layouts).

Instructions are not time: a run that misses caches or branches more costs more time per
instruction. The count tells what the code adds; the timed scenario tells what it costs.

The count also moves with where objects happen to lie in memory (CPython's type-attribute cache
and its contextvars hash by address: a collision costs a lookup), by about 0.3% of a run from one
layout to another, for the same code. The full run therefore counts every side in three heap
layouts (the child allocates some padding before it imports anything), each against stock's in the
same layout, and reports the median ratio and the spread; the quick run counts one layout.
"""
from __future__ import annotations

import asyncio
import gc
import os
import re
import shutil
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks.common import ROOT, say

SIDES = ("stock", "floor", "builtins_only", "five_observers")
ENTRIES = ("handler", "cycle")
LAYOUTS = {True: (0,), False: (0, 1, 2)}  # heap layouts, by quick: one in the quick run, three in the full
WARM_CALLS = 50
PADDING = 4096  # bytes and objects per layout step, made before the imports: every later address moves
CHILD_TIMEOUT = 900  # seconds: a process takes about 40 under callgrind
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def run(*, quick: bool) -> dict[str, Any]:
    """Instructions per async run (and per cycle, in the full run) of every side; skipped,
    with the reason in the report, where valgrind is not installed."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return {"skipped": "valgrind is not installed (Debian: apt-get install valgrind)"}
    calls = 1000  # in both modes: the count per run moves with N (a collection lands in some windows)
    entries = ENTRIES[:1] if quick else ENTRIES
    layouts = LAYOUTS[quick]
    report: dict[str, Any] = {"params": {"calls": calls, "warm_calls": WARM_CALLS, "kind": "async",
                                         "layouts": len(layouts), "tool": "valgrind --tool=callgrind"}}
    for entry in entries:
        say(f"instructions: per {entry}, {len(SIDES) * 2 * len(layouts)} processes under callgrind ({calls} calls)")
        report[entry] = count("async", entry, calls, valgrind, layouts)
    return report


def count(kind: str, entry: str, calls: int, valgrind: str, layouts: tuple[int, ...] = (0,)) -> dict[str, Any]:
    """Instructions per run of every side, and each side's ratio to stock's: the medians over the
    heap layouts, each ratio taken against stock in the same layout (with their spread, if several)."""
    jobs = [(side, n, layout) for layout in layouts for side in SIDES for n in (0, calls)]
    with ThreadPoolExecutor(max_workers=2) as pool:  # a process each: two at a time on two CPUs
        counts = pool.map(lambda job: _collected(valgrind, job[0], job[1], job[2], kind, entry), jobs)
        totals = dict(zip(jobs, counts, strict=True))
    counted: dict[str, Any] = {}
    for side in SIDES:
        per_run = [(totals[side, calls, layout] - totals[side, 0, layout]) / calls for layout in layouts]
        ratios = [round(value / ((totals["stock", calls, layout] - totals["stock", 0, layout]) / calls), 4)
                  for value, layout in zip(per_run, layouts, strict=True)]
        counted[side] = {"instructions": round(statistics.median(per_run)), "ratio": statistics.median(ratios)}
        if len(layouts) > 1:
            counted[side]["ratios"] = ratios
    return counted


def _collected(valgrind: str, side: str, calls: int, layout: int, kind: str, entry: str) -> int:
    command = [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null",
               sys.executable, "-m", "benchmarks.instructions", side, str(calls), kind, entry, str(layout)]
    # The same hash seed in every process (set iteration and dict probing follow it); no
    # VALGRIND_OPTS of the caller's (its -q would hide the total).
    env = {key: value for key, value in os.environ.items() if key != "VALGRIND_OPTS"} | {"PYTHONHASHSEED": "0"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False,
                          timeout=CHILD_TIMEOUT)
    return collected_total(done.stderr, f"callgrind of {side} ({calls} calls, exit code {done.returncode})")


def collected_total(stderr: str, what: str) -> int:
    """The instructions callgrind counted, from its summary on stderr."""
    found = _COLLECTED.search(stderr)
    if found is None:
        raise RuntimeError(f"{what}: no 'Collected :' line in its output: {stderr[-2000:]}")
    return int(found.group(1))


async def _runs(side: str, calls: int, kind: str, entry: str) -> None:
    """The child: ``calls`` runs of one side, after the same warm-up as every other count."""
    import kopf_outcomes  # here: the child's padding comes first
    from benchmarks import overhead

    subject = overhead.Subject(overhead.HANDLERS[kind])
    drain, restore = overhead.logging_as_kopf_run()
    kopf_outcomes.uninstall()
    floor = overhead.Floor()
    if side == "floor":
        floor.attach()
    elif side != "stock":
        kopf_outcomes.install(plugins=overhead.PLUGIN_SETS[side](), entry_points=False)
    try:
        await subject.run(WARM_CALLS, entry)
        # Everything made so far (imports, the warm-up) is frozen out of the collector: a full
        # collection in the counted window then walks only what the runs made, not the whole heap,
        # and the count no longer moves with where one happens to land.
        gc.collect()
        gc.freeze()
        await subject.run(calls, entry)  # with 0 too: each run() has its own warm-up calls
    finally:
        floor.detach()
        kopf_outcomes.uninstall()
        drain()
        restore()


if __name__ == "__main__":
    side_, calls_, kind_, entry_, layout_ = (sys.argv[1:] + ["0"])[:5]
    _padding = [bytearray(PADDING * int(layout_)), [object() for _ in range(PADDING * int(layout_))]]
    asyncio.run(_runs(side_, int(calls_), kind_, entry_))
