"""Every problem check-policy and explain report is located and named: encoding errors and
nesting too deep by line, a module that exits at import as a problem with the summary after it,
and explain's usage errors before any of its output."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kopf_outcomes.policy.cli import check_policy, explain
from kopf_outcomes.policy.errors import deepest_line


def run(command: object, *args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(command, [str(a) for a in args])  # type: ignore[arg-type]
    return result.exit_code, result.stdout, result.stderr


def test_an_encoding_error_is_located_by_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_bytes(b'delay = 5\n# caf\xe9 au lait\n[levels]\nretry = "INFO"\n')
    code, _, err = run(check_policy, path)
    assert code == 1
    first, summary = err.splitlines()
    assert first == (f"{path}, line 2: not UTF-8: byte 0xe9 at column 6 (invalid continuation byte);"
                     f" a TOML file is UTF-8")
    assert summary.startswith(f"{path}: invalid policy, 1 problem")


def test_nesting_too_deep_is_located_at_its_line(tmp_path: Path) -> None:
    """Too deep for the TOML parser at Python's default recursion limit, which the test pins: mypy,
    run in process by the docs tests, raises it for the session, and then 5,000 levels parse."""
    path = tmp_path / "policy.toml"
    path.write_text('delay = 5\n# [not [nesting] "[[["\nname = "[[[["\n'
                    f"deep = {'[' * 5000}{']' * 5000}\nremember = true\n")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        code, _, err = run(check_policy, path)
    finally:
        sys.setrecursionlimit(limit)
    assert code == 1
    assert err.splitlines()[0] == f"{path}, line 4: TOML syntax error: arrays or tables nested too deeply"


@pytest.mark.parametrize("text, line", [
    ("a = 1\nb = [[1], [2]]\nc = {x = {y = [1]}}\n", 3),
    ("a = '''\n[[[[[\n'''\nb = [1]\n", 4),  # brackets in a multi-line string do not count
    ('a = "\\"[[[["\nb = [[1]]\n', 2),  # nor in a string with an escaped quote
])
def test_the_deepest_line_leaves_strings_and_comments_out(text: str, line: int) -> None:
    assert deepest_line(text) == line


def test_a_module_that_exits_at_import_is_a_problem_and_the_summary_follows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "exits_at_import.py").write_text("raise SystemExit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "exits_at_import", raising=False)
    path = tmp_path / "policy.toml"
    path.write_text('[exceptions."exits_at_import.Busy"]\noutcome = "retry"\n')
    code, _, err = run(check_policy, path)
    assert code == 1, err
    problem, summary = err.splitlines()
    assert problem == (f'{path}, line 1: [exceptions] "exits_at_import.Busy": importing'
                       f" 'exits_at_import' failed: SystemExit: 3")
    assert summary.startswith(f"{path}: invalid policy, 1 problem")


def test_explain_reports_a_bad_exception_name_before_any_output(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text("delay = 5\n")
    code, out, err = run(explain, "--policy", path, "--handler", "h", "--exception", "no_such_module.Error")
    assert code == 2
    assert out == ""  # no `run:` line before the usage error
    assert "Invalid value for --exception" in err


def test_explain_with_a_missing_policy_is_a_usage_error(tmp_path: Path) -> None:
    code, out, err = run(explain, "--policy", tmp_path / "missing.toml", "--handler", "h", "--result", "true")
    assert (code, out) == (2, "")
    assert "missing.toml' does not exist" in err and "invalid policy" not in err
