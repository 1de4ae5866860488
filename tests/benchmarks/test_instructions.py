"""The instruction count's arithmetic, its skip without valgrind, and its rows in the table."""
from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from benchmarks import instructions, overhead, report
from benchmarks.common import ROOT

# Total instructions of a process: a start-up cost, plus a per-run cost per side.
START_UP = 2_600_000_000
PER_RUN = {"stock": 300_000, "floor": 306_000, "builtins_only": 315_000, "five_observers": 336_000}


def fake_collected(valgrind: str, side: str, calls: int, layout: int, kind: str, entry: str) -> int:
    runs = instructions.WARM_CALLS + calls + 2 * overhead.WARM_CALLS  # as the child runs them
    return START_UP + PER_RUN[side] * runs


def test_each_layout_is_compared_with_stock_in_the_same_layout_and_the_median_is_reported(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Where objects lie moves every side's count (stock's too): a ratio is taken within a layout."""
    moved = {0: 0, 1: 3_000, 2: -3_000}  # what a layout adds to every side's run, stock's too

    def collected(valgrind: str, side: str, calls: int, layout: int, kind: str, entry: str) -> int:
        return fake_collected(valgrind, side, calls, layout, kind, entry) + moved[layout] * calls

    monkeypatch.setattr(instructions, "_collected", collected)
    counted = instructions.count("async", "handler", 1000, "/usr/bin/valgrind", (0, 1, 2))
    five = counted["five_observers"]
    assert five["ratios"] == [1.12, round(339_000 / 303_000, 4), round(333_000 / 297_000, 4)]
    assert five["ratio"] == sorted(five["ratios"])[1] and five["instructions"] == 336_000
    assert "ratios" not in instructions.count("async", "handler", 1000, "/usr/bin/valgrind")["stock"]


def test_the_count_of_a_run_is_the_difference_of_two_processes_divided_by_the_calls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(instructions, "_collected", fake_collected)
    counted = instructions.count("async", "handler", 1000, "/usr/bin/valgrind")
    assert {side: row["instructions"] for side, row in counted.items()} == PER_RUN
    assert counted["five_observers"]["ratio"] == pytest.approx(1.12)
    assert counted["stock"]["ratio"] == pytest.approx(1.0)


def test_without_valgrind_the_scenario_is_skipped_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(instructions.shutil, "which", lambda name: None)
    counted = instructions.run(quick=True)
    assert counted == {"skipped": "valgrind is not installed (Debian: apt-get install valgrind)"}
    assert "not counted: valgrind is not installed" in report.markdown(_report(counted))


def test_the_quick_run_counts_runs_only_and_the_full_run_cycles_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(instructions.shutil, "which", lambda name: "/usr/bin/valgrind")
    monkeypatch.setattr(instructions, "_collected", fake_collected)
    quick, full = instructions.run(quick=True), instructions.run(quick=False)
    assert ("handler" in quick, "cycle" in quick) == (True, False)
    assert ("handler" in full, "cycle" in full) == (True, True)
    table = report.markdown(_report(full))
    assert "| Instructions per handler run (callgrind) | async handler, 5 observer plugins | 300,000 | 336,000 " \
           "| 1.120× |" in table
    assert "| Instructions per reaction cycle (1 handler) (callgrind) | async handler, the floor " in table


@pytest.mark.parametrize("entry", instructions.ENTRIES)
@pytest.mark.parametrize("side", instructions.SIDES)
def test_the_child_process_runs_every_side_and_entry(side: str, entry: str) -> None:
    """What callgrind runs, here without it: 2 calls, in a process of its own as there (it
    installs and uninstalls kopf-outcomes, which must not touch this test session's)."""
    command = [sys.executable, "-m", "benchmarks.instructions", side, "2", "async", entry, "1"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_total_is_read_from_callgrinds_summary_and_its_absence_is_an_error() -> None:
    stderr = "==123== Events    : Ir\n==123== Collected : 2601180331\n==123==\n==123== I   refs:      2,601,180,331\n"
    assert instructions.collected_total(stderr, "stock") == 2601180331
    with pytest.raises(RuntimeError, match="stock: no 'Collected :' line"):
        instructions.collected_total("valgrind: failed to start tool 'callgrind'", "stock")


def _report(counted: dict[str, Any]) -> dict[str, Any]:
    machine = {"nproc": 2, "cpu_model": "x", "memory_gib": 1, "python": "3", "kopf": "1",
               "kopf_outcomes": "0", "git_commit": "abc"}
    return {"meta": {"mode": "quick", "date": "today", "machine": machine}, "instructions": counted}


def _counted(builtins_per_run: float, five_per_run: float, five_per_cycle: float | None) -> dict[str, Any]:
    def sides(builtins: float, five: float) -> dict[str, Any]:
        return {"stock": {"instructions": 1000, "ratio": 1.0}, "floor": {"instructions": 1024, "ratio": 1.024},
                "builtins_only": {"instructions": round(1000 * builtins), "ratio": builtins},
                "five_observers": {"instructions": round(1000 * five), "ratio": five}}
    counted = {"handler": sides(builtins_per_run, five_per_run)}
    if five_per_cycle is not None:
        counted["cycle"] = sides(1.036, five_per_cycle)
    return counted


def test_the_hold_lines_are_the_issues_and_are_checked_on_the_counted_ratios() -> None:
    """Built-ins ≤ 1.04× per run; five observers ≤ 1.08× per run and per cycle (issue 45)."""
    within = report.evaluate(_report(_counted(1.04, 1.08, 1.08)))
    assert {t["target"]: (t["limit"], t["met"]) for t in within if t["scenario"] == "instructions"} == {
        "built-ins only, per run: ours/stock <= 1.04 (hold line)": (1.04, True),
        "5 observers, per run: ours/stock <= 1.08 (hold line)": (1.08, True),
        "5 observers, per cycle: ours/stock <= 1.08 (hold line)": (1.08, True),
    }
    beyond = report.evaluate(_report(_counted(1.041, 1.064, 1.081)))
    assert [t["met"] for t in beyond if t["scenario"] == "instructions"] == [False, True, False]


def test_the_table_shows_each_hold_line_beside_its_count_and_none_for_what_was_not_counted() -> None:
    counted = _report(_counted(1.025, 1.09, None))
    counted["targets"] = report.evaluate(counted)
    table = report.markdown(counted)
    assert "| async handler, built-ins only | 1,000 | 1,025 | 1.025× | <= 1.04: met |" in table
    assert "| async handler, 5 observer plugins | 1,000 | 1,090 | 1.090× | <= 1.08: **missed** |" in table
    assert "| async handler, the floor | 1,000 | 1,024 | 1.024× |  |" in table
    assert [t["met"] for t in counted["targets"] if t["target"].startswith("5 observers, per cycle")] == [None]
