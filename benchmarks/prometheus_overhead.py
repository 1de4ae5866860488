"""
The Prometheus plugin's observer overhead, beside the five trivial observers of scenario 1.

    .venv/bin/python -m benchmarks.prometheus_overhead [--quick]

The same in-process harness as ``benchmarks/overhead.py`` (stock and ours alternating round by
round), with one more plugin set: the plugin ``kopf_outcomes_prometheus.plugin`` as an operator
loads it. Per handler run (``execute_handler_once``: the outcome counter, the waiting gauge, the
wait clock) and per reaction cycle (``execute_handlers_once``: also the per-cycle report of the
object's waiting handlers). JSON on stdout, progress on stderr.
"""
from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from benchmarks import overhead
from benchmarks.common import say


async def main(quick: bool) -> dict[str, Any]:
    from kopf_outcomes_prometheus import plugin

    overhead.PLUGIN_SETS["prometheus"] = lambda: [plugin]
    rounds, warmup = (30, 3) if quick else (100, 10)
    calls = {"async": 100 if quick else 200, "sync": 30 if quick else 60}
    report: dict[str, Any] = {"params": {"rounds": rounds, "warmup_rounds": warmup, "calls_per_round": calls}}
    for entry in ("handler", "cycle"):
        for plugin_set in ("five_observers", "prometheus"):
            for kind in ("async", "sync"):
                say(f"prometheus overhead: {plugin_set}, {kind} handler, per {entry}")
                report.setdefault(entry, {}).setdefault(plugin_set, {})[kind] = await asyncio.create_task(
                    overhead._measure(kind, plugin_set, rounds=rounds, calls=calls[kind], warmup=warmup,
                                      entry=entry))
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--quick", action="store_true", help="fewer rounds: a smoke run")
    print(json.dumps(asyncio.run(main(parser.parse_args().quick)), indent=2))
