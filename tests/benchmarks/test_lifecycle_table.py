"""The lifecycle scenario's targets and rows, from a report's figures (no API server)."""
from __future__ import annotations

from typing import Any

from benchmarks import lifecycle_table
from benchmarks.report import evaluate


def side(cpu_ms: float, requests: float) -> dict[str, Any]:
    return {"cpu_ms_per_object": cpu_ms, "wall_s": 50.0, "peak_rss_mib": [80.0],
            "per_object": {"requests": requests, "writes": requests, "events": 0.0, "by_verb": {"patch": requests}},
            "requests": {"refused": {"patch kopfexamples 404": 3}},
            "callback_to_gone": {"p50_s": 0.1, "p99_s": 0.2}, "servers_cpu_s": {"kube-apiserver": 1.0, "etcd": 0.5}}


def layout(cpu: float, requests: float) -> dict[str, Any]:
    return {"stock": side(20.0, 10.0), "ours": side(20.0 * cpu, 10.0 * requests),
            "ratio": {"cpu": cpu, "requests": requests, "writes": requests, "wall": 1.0}}


REPORT: dict[str, Any] = {"lifecycle": {
    "params": {"objects": 10, "callback_after_s": 3.0, "stock_poll_s": 1.0},
    "one_process": layout(cpu=0.503, requests=0.38), "three_shards": layout(cpu=0.5, requests=0.68),
    "three_shards_selected": layout(cpu=0.45, requests=0.51),
    "three_over_one": {"three_shards": {"stock": {"wall": 1.0, "cpu": 1.2, "requests": 0.7},
                                        "ours": {"wall": 1.5, "cpu": 2.5, "requests": 1.2}},
                       "three_shards_selected": {"stock": {"wall": 0.9, "cpu": 1.05, "requests": 1.0},
                                                 "ours": {"wall": 0.8, "cpu": 1.1, "requests": 1.0}}}}}


def test_each_layout_is_held_to_half_of_stock_s_cpu_and_requests() -> None:
    met = {t["target"]: t["met"] for t in evaluate(REPORT) if t["scenario"] == "lifecycle"}
    assert met == {
        "one process: CPU per lifecycle, ours/stock <= 0.5": False,
        "one process: API requests per lifecycle, ours/stock <= 0.5": True,
        "3 shards by label: CPU per lifecycle, ours/stock <= 0.5": True,
        "3 shards by label: API requests per lifecycle, ours/stock <= 0.5": False,
        "3 shards by label, selected by the API server: CPU per lifecycle, ours/stock <= 0.5": True,
        "3 shards by label, selected by the API server: API requests per lifecycle, ours/stock <= 0.5": False,
    }


def test_rows_show_the_figures_per_object() -> None:
    rows: list[str] = []
    lifecycle_table.rows(REPORT["lifecycle"], rows.append, lambda prefix: prefix)
    text = "\n".join(rows)
    assert "| operator CPU per object, ms | 20.00 | 10.06 | 0.503× | one process: CPU |" in text
    assert "| … of them refused (4xx: conflicts, gone), per object | 0.30 | 0.30 | | |" in text
    assert ("3 shards by label / one process, kopf-outcomes: wall time, CPU, requests "
            "| | | 1.50× / 2.50× / 1.20×") in text
    assert ("3 shards by label, selected by the API server / one process, stock Kopf: wall time, CPU, requests "
            "| | | 0.90× / 1.05× / 1.00×") in text
