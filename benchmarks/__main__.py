"""
The benchmarks' one command.

    .venv/bin/python -m benchmarks run [--quick] [--out benchmarks/results/report.json] [--only ...]
    .venv/bin/python -m benchmarks render benchmarks/results/report.json
    .venv/bin/python -m benchmarks profile [--kind async|sync] [--plugins builtins_only|five_observers]
                                           [--entry handler|cycle]

``run`` exits 0 when every scenario ran (whether or not the targets were met), 1 when one
failed (its error is in the report), 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks import report as reporting
from benchmarks.common import ROOT, machine_info, now_iso, say
from benchmarks.kube import api_client, ensure_crd_served
from benchmarks.retries import Retries

SCENARIOS = ("overhead", "instructions", "latency", "writes", "scale", "jobs", "wakeups", "curve", "lifecycle")
IN_PROCESS = frozenset({"overhead", "instructions"})  # no API server needed
OWN_CLUSTER = frozenset({"lifecycle"})  # a control plane of its own (benchmarks/own_cluster.py)
RESULTS = ROOT / "benchmarks" / "results"


def _save(report: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")


def render(report: dict[str, Any], out: Path) -> str:
    """Write the JSON, the Markdown table and the plot next to each other; return the table."""
    report["targets"] = reporting.evaluate(report)
    _save(report, out)
    table = reporting.markdown(report)
    out.with_suffix(".md").write_text(table)
    png = reporting.plot(report, out.with_name(out.stem + "-latency.png"))
    report["meta"]["plot"] = png.name if png is not None else None
    curve = reporting.plot_curve(report, out.with_name(out.stem + "-curve.png"))
    report["meta"]["curve_plot"] = curve.name if curve is not None else None
    _save(report, out)
    return table


async def _run(quick: bool, only: list[str], out: Path, scale_objects: int | None = None,
               curve_sizes: list[int] | None = None, wakeups_parents: int | None = None) -> int:
    from kopf_outcomes_testing.cluster import ensure_running
    from kopf_outcomes_testing.cluster.resources import EXAMPLE_CRD

    began = time.monotonic()
    report: dict[str, Any] = {"meta": {
        "date": now_iso(), "mode": "quick" if quick else "full", "scenarios": only,
        "machine": machine_info(), "durations_s": {},
        "command": "python -m benchmarks run" + (" --quick" if quick else "")
                   + (f" --scale-objects {scale_objects}" if scale_objects else "")
                   + (f" --curve-sizes {','.join(map(str, curve_sizes))}" if curve_sizes else "")
                   + (f" --wakeups-parents {wakeups_parents}" if wakeups_parents else ""),
    }}
    failed = False
    total = Retries()
    cluster = None
    if any(s not in IN_PROCESS | OWN_CLUSTER for s in only):
        cluster = await asyncio.to_thread(ensure_running, progress=say)
        report["meta"]["cluster"] = {"server": cluster.server}
    api = await api_client(cluster.admin_kubeconfig) if cluster is not None else None
    try:
        for name in only:
            say(f"=== {name} ===")
            started = time.monotonic()
            retries = Retries()
            if api is not None:
                api.retries = retries  # every API call of this scenario counts its retries here
            try:
                if api is not None and name not in IN_PROCESS | OWN_CLUSTER:
                    await ensure_crd_served(api, EXAMPLE_CRD)
                report[name] = await _scenario(name, quick, api, cluster, scale_objects, curve_sizes, retries,
                                               wakeups_parents)
            except Exception as e:
                failed = True
                report[name] = {"error": f"{type(e).__name__}: {e}"}
                traceback.print_exc()
            report[name]["retries"] = retries.report()
            total.add(retries)
            report["meta"]["retries"] = total.report()
            say(f"{name}: {_retries_line(retries.report())}")
            report["meta"]["durations_s"][name] = round(time.monotonic() - started, 1)
            report["meta"]["duration_s"] = round(time.monotonic() - began, 1)
            _save(report, out)  # what ran so far survives an interruption
    finally:
        if api is not None:
            await api.close()
    table = render(report, out)
    print(table)
    say(f"report: {out}, {out.with_suffix('.md')}; {report['meta']['duration_s']:.0f}s in total")
    return 1 if failed else 0


def _retries_line(retries: dict[str, Any]) -> str:
    causes = ", ".join(f"{n} x {why}" for why, n in retries["by_cause"].items())
    return (f"{retries['total']} API retries" + (f" ({causes}; {retries['waited_s']:g}s waited)" if causes else "")
            + (f", {retries['gave_up']} calls gave up" if retries["gave_up"] else ""))


async def _scenario(name: str, quick: bool, api: Any, cluster: Any, scale_objects: int | None,
                    curve_sizes: list[int] | None, retries: Retries, wakeups_parents: int | None = None
                    ) -> dict[str, Any]:
    from benchmarks import curve, instructions, jobs, latency, lifecycle, overhead, scale, wakeups, writes

    runs: dict[str, Callable[[], Awaitable[dict[str, Any]]]] = {
        "overhead": lambda: overhead.run(quick=quick),
        "instructions": lambda: asyncio.to_thread(instructions.run, quick=quick),
        "latency": lambda: latency.run(api, str(cluster.admin_kubeconfig), quick=quick),
        "writes": lambda: writes.run(api, cluster, quick=quick),
        "scale": lambda: scale.run(api, str(cluster.admin_kubeconfig), quick=quick, objects=scale_objects),
        "jobs": lambda: jobs.run(api, cluster, quick=quick),
        "wakeups": lambda: wakeups.run(api, cluster, quick=quick, parents=wakeups_parents),
        "curve": lambda: curve.run(api, str(cluster.admin_kubeconfig), quick=quick, sizes=curve_sizes),
        "lifecycle": lambda: lifecycle.run(quick=quick, retries=retries),
    }
    return await runs[name]()


def _sizes(value: str) -> list[int]:
    try:
        sizes = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers of objects like 0,10,100, got {value!r}") from None
    if not sizes or any(size < 0 for size in sizes):
        raise argparse.ArgumentTypeError(f"expected numbers of objects (0 or more) like 0,10,100, got {value!r}")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the scenarios, stock Kopf and ours side by side")
    run.add_argument("--quick", action="store_true",
                     help="small sizes, short windows: under 5 minutes (a smoke run)")
    run.add_argument("--out", type=Path, default=None,
                     help="the JSON report (default: benchmarks/results/report.json, "
                          "or quick.json with --quick); the .md table and the plot go beside it")
    run.add_argument("--only", default=",".join(SCENARIOS),
                     help=f"comma-separated scenarios (default: all of {','.join(SCENARIOS)})")
    run.add_argument("--scale-objects", type=int, default=None, metavar="N",
                     help="waiting objects in the scale scenario (default: 10000, or 100 with --quick)")
    run.add_argument("--wakeups-parents", type=int, default=None, metavar="N",
                     help="parents in the wakeups scenario, 10 children each (default: 1000, or 10 with --quick)")
    run.add_argument("--curve-sizes", type=_sizes, default=None, metavar="N,N,...",
                     help="waiting objects at each point of the scale curve "
                          "(default: 0,10,100,1000,10000, or 0,10,100 with --quick)")
    again = commands.add_parser("render", help="re-render the table and the plot of a JSON report")
    again.add_argument("report", type=Path)
    profile = commands.add_parser("profile", help="cProfile the patched handler path")
    profile.add_argument("--kind", choices=["async", "sync"], default="async")
    profile.add_argument("--plugins", choices=["builtins_only", "five_observers"],
                         default="builtins_only")
    profile.add_argument("--calls", type=int, default=20000)
    profile.add_argument("--entry", choices=["handler", "cycle"], default="handler",
                         help="one handler run, or one reaction cycle with that one handler")
    args = parser.parse_args(argv)

    if args.command == "render":
        print(render(json.loads(args.report.read_text()), args.report))
        return 0
    if args.command == "profile":
        from benchmarks import overhead

        overhead.profile(args.kind, args.plugins, args.calls, args.entry)
        return 0
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(only) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
    if args.scale_objects is not None and args.scale_objects < 1:
        parser.error(f"--scale-objects must be at least 1, got {args.scale_objects}")
    out = args.out or RESULTS / ("quick.json" if args.quick else "report.json")
    if args.wakeups_parents is not None and args.wakeups_parents < 1:
        parser.error(f"--wakeups-parents must be at least 1, got {args.wakeups_parents}")
    return asyncio.run(_run(args.quick, only, out.resolve(), args.scale_objects, args.curve_sizes,
                            args.wakeups_parents))


if __name__ == "__main__":
    sys.exit(main())
