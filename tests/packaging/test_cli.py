"""The main CLI: its version, ``python -m``, and commands contributed by other distributions."""
from __future__ import annotations

import subprocess
import sys
from importlib.metadata import EntryPoint

import pytest
from click.testing import CliRunner

import kopf_outcomes.cli
from kopf_outcomes._version import __version__
from kopf_outcomes.cli import COMMANDS_GROUP, main


def test_python_dash_m_runs_the_cli() -> None:
    result = subprocess.run([sys.executable, "-m", "kopf_outcomes", "--version"],
                            capture_output=True, text=True, check=True)
    assert result.stdout.strip() == f"kopf-outcomes, version {__version__}"


def test_cluster_comes_from_the_testing_distribution() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "cluster" in result.output  # installed here (editable), through the entry point
    status = CliRunner().invoke(main, ["cluster", "--help"])
    assert status.exit_code == 0 and "build" in status.output


def test_missing_cluster_command_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kopf_outcomes.cli, "entry_points", lambda group: [])
    result = CliRunner().invoke(main, ["cluster", "up"])
    assert result.exit_code == 2
    assert "`cluster` comes with the kopf-outcomes-testing package" in result.output
    assert "pip install kopf-outcomes-testing" in result.output


def test_an_entry_point_that_is_not_a_command_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = EntryPoint(name="oops", value="os.path:join", group=COMMANDS_GROUP)
    monkeypatch.setattr(kopf_outcomes.cli, "entry_points", lambda group: [bad])
    result = CliRunner().invoke(main, ["oops"])
    assert result.exit_code == 1
    assert "entry point 'os.path:join' (group kopf_outcomes.commands) is not a click command" in result.output
