"""The scale curve's arithmetic, its rows and chart in the report, its target, and its sizes option."""
from __future__ import annotations

from typing import Any

import pytest

from benchmarks import __main__ as cli
from benchmarks import curve, report
from benchmarks.common import ratio


def point(objects: int, stock: float, ours: float, peak: float = 0.0) -> dict[str, Any]:
    sides = {"stock": {"rss_mib": stock, "peak_rss_mib": stock + peak},
             "ours": {"rss_mib": ours, "peak_rss_mib": ours + peak}}
    return {"objects": objects, **sides,
            "ratio": {key: ratio(sides["ours"][key], sides["stock"][key]) for key in ("rss_mib", "peak_rss_mib")}}


def curve_report(points: list[dict[str, Any]]) -> dict[str, Any]:
    machine = {"nproc": 2, "cpu_model": "x", "memory_gib": 1, "python": "3", "kopf": "1",
               "kopf_outcomes": "0", "git_commit": "abc"}
    found = {"meta": {"mode": "quick", "date": "today", "machine": machine},
             "curve": {"params": {"sizes": [p["objects"] for p in points]}, "points": points,
                       "per_object_kib": curve.per_object(points)}}
    found["targets"] = report.evaluate(found)
    return found


def test_each_waiting_object_costs_the_rss_grown_from_the_first_size_to_the_last_per_object() -> None:
    cost = curve.per_object([point(0, 80.0, 81.0), point(10, 82.0, 82.0), point(100, 100.0, 91.0)])
    assert cost == {"stock": pytest.approx(204.8), "ours": pytest.approx(102.4)}
    assert curve.per_object([point(0, 80.0, 81.0)]) == {"stock": None, "ours": None}


def test_the_target_is_the_worst_size_and_each_row_says_its_own() -> None:
    found = curve_report([point(0, 80.0, 80.0), point(10, 80.0, 83.0), point(100, 100.0, 104.0, peak=5.0)])
    [target] = [t for t in found["targets"] if t["scenario"] == "curve"]
    assert target["value"] == pytest.approx(1.04) and target["met"] is True  # 104/100, the worst of the sizes
    table = report.markdown(found)
    assert "| Scale curve, 10 waiting objects | operator RSS / peak RSS, MiB | 80.0 / 80.0 | 83.0 / 83.0 " \
           "| 1.04× / 1.04× | <= 1.05: met |" in table
    assert "| Scale curve, 100 waiting objects | operator RSS / peak RSS, MiB | 100.0 / 105.0 | 104.0 / 109.0 " \
           "| 1.04× / 1.04× | <= 1.05: met |" in table
    assert "| | RSS per waiting object, KiB (from 0 to 100) | 204.8 | 245.8 | | |" in table


def test_a_size_over_the_limit_is_missed_and_the_chart_draws_every_side_and_size() -> None:
    found = curve_report([point(0, 80.0, 80.0), point(100, 100.0, 106.0)])
    assert [t["met"] for t in found["targets"] if t["scenario"] == "curve"] == [False]
    table = report.markdown(found)
    assert "| 1.06× / 1.06× | <= 1.05: **missed** |" in table
    chart = report.curve_chart(found["curve"]["points"], width=10)
    assert chart == ["      0 stock |########  |   80.0 MiB (80.0)",
                     "        ours  |########  |   80.0 MiB (80.0)",
                     "    100 stock |######### |  100.0 MiB (100.0)",
                     "        ours  |##########|  106.0 MiB (106.0)"]
    assert "\n".join(report.curve_chart(found["curve"]["points"])) in table


@pytest.mark.parametrize("given, expected", [("0,10,100", [0, 10, 100]), ("1000", [1000])])
def test_the_sizes_option_reads_numbers_of_objects(given: str, expected: list[int]) -> None:
    assert cli._sizes(given) == expected


@pytest.mark.parametrize("given", ["ten", "-1", ","])
def test_the_sizes_option_refuses_what_is_not_a_number_of_objects(given: str) -> None:
    with pytest.raises(SystemExit):
        cli.main(["run", "--only", "curve", "--curve-sizes", given])
