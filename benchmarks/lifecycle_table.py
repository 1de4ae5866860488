"""The lifecycle scenario's targets (issue 31) and its rows of the Markdown table."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

LIMIT = 0.5  # ours / stock, per lifecycle: CPU and API requests
LAYOUTS = {"one_process": "one process", "three_shards": "3 shards by label",
           "three_shards_selected": "3 shards by label, selected by the API server"}


def _ratio(layout: str, key: str) -> Callable[[dict[str, Any]], Any]:
    return lambda report: report["lifecycle"][layout]["ratio"][key]


TARGETS: list[tuple[str, str, Callable[[dict[str, Any]], Any], str, float]] = [
    ("lifecycle", f"{title}: {measure} per lifecycle, ours/stock <= {LIMIT:g}", _ratio(layout, key), "<=", LIMIT)
    for layout, title in LAYOUTS.items() for measure, key in (("CPU", "cpu"), ("API requests", "requests"))
]


def _n(value: Any, digits: int = 2) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def rows(section: dict[str, Any], row: Callable[[str], None], met: Callable[[str], str]) -> None:
    """One block per layout: CPU, requests by verb, writes, Events, wall time, RSS; ours / stock."""
    params = section["params"]
    for layout, title in LAYOUTS.items():
        stock, ours, ratios = section[layout]["stock"], section[layout]["ours"], section[layout]["ratio"]
        a, b = stock["per_object"], ours["per_object"]
        head = (f"Lifecycle, {params['objects']:,} objects, {title} (callback {params['callback_after_s']:g} s "
                f"after the start; stock polls every {params['stock_poll_s']:g} s)")
        verbs = sorted(set(a["by_verb"]) | set(b["by_verb"]))
        by_verb = " / ".join(verbs)

        def pick(side: dict[str, Any], verbs: list[str] = verbs) -> str:
            return " / ".join(_n(side["by_verb"].get(verb, 0.0)) for verb in verbs)

        row(f"| {head} | operator CPU per object, ms | {_n(stock['cpu_ms_per_object'])} "
            f"| {_n(ours['cpu_ms_per_object'])} | {_n(ratios['cpu'], 3)}× | {met(f'{title}: CPU')} |")
        row(f"| | API requests per object (Kopf's, audit log) | {_n(a['requests'])} | {_n(b['requests'])} "
            f"| {_n(ratios['requests'], 3)}× | {met(f'{title}: API requests')} |")
        row(f"| | … by verb: {by_verb} | {pick(a)} | {pick(b)} | | |")
        row(f"| | writes / Events per object | {_n(a['writes'])} / {_n(a['events'])} "
            f"| {_n(b['writes'])} / {_n(b['events'])} | {_n(ratios['writes'])}× | |")
        refused = [sum(side["requests"].get("refused", {}).values()) / params["objects"] for side in (stock, ours)]
        row(f"| | … of them refused (4xx: conflicts, gone), per object | {_n(refused[0])} | {_n(refused[1])} | | |")
        row(f"| | wall time, creation → last gone, s | {_n(stock['wall_s'], 1)} | {_n(ours['wall_s'], 1)} "
            f"| {_n(ratios['wall'])}× | |")
        row(f"| | callback → gone, p50 / p99, s | {_n(stock['callback_to_gone']['p50_s'])} / "
            f"{_n(stock['callback_to_gone']['p99_s'])} | {_n(ours['callback_to_gone']['p50_s'])} / "
            f"{_n(ours['callback_to_gone']['p99_s'])} | | |")
        row(f"| | peak RSS per process, MiB | {' / '.join(_n(v, 1) for v in stock['peak_rss_mib'])} "
            f"| {' / '.join(_n(v, 1) for v in ours['peak_rss_mib'])} | | |")
        row(f"| | kube-apiserver / etcd CPU, s | {_n(stock['servers_cpu_s'].get('kube-apiserver'))} / "
            f"{_n(stock['servers_cpu_s'].get('etcd'))} | {_n(ours['servers_cpu_s'].get('kube-apiserver'))} / "
            f"{_n(ours['servers_cpu_s'].get('etcd'))} | | |")
    for layout, gains in section["three_over_one"].items():
        for side, title in (("stock", "stock Kopf"), ("ours", "kopf-outcomes")):
            gain = gains[side]
            row(f"| | {LAYOUTS[layout]} / one process, {title}: wall time, CPU, requests | | | "
                f"{_n(gain['wall'])}× / {_n(gain['cpu'])}× / {_n(gain['requests'])}× | |")
