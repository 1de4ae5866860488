"""The CLI contract on a private, real control plane: up, status, env, down."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from kopf_outcomes.cli import main


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_up_status_env_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("KOPF_OUTCOMES_STATE_DIR", str(state))
    runner = CliRunner()

    up = runner.invoke(main, ["cluster", "up"])
    assert up.exit_code == 0, up.output
    kubeconfig = Path(up.stdout.splitlines()[-1])
    assert kubeconfig == state / "admin.kubeconfig"
    assert json.loads(kubeconfig.read_text())["users"][0]["name"] == "admin"
    pids = [p["pid"] for p in json.loads((state / "state.json").read_text())["processes"]]
    assert len(pids) == 2 and all(pid_alive(pid) for pid in pids)

    again = runner.invoke(main, ["cluster", "up"])  # finds it running: same cluster
    assert again.exit_code == 0, again.output
    assert again.stdout.splitlines()[-1] == str(kubeconfig)
    assert "starting" not in again.stderr

    assert runner.invoke(main, ["cluster", "status"]).exit_code == 0
    env = runner.invoke(main, ["cluster", "env"])
    assert env.exit_code == 0
    assert env.stdout.splitlines() == [
        f"export KUBECONFIG={kubeconfig}",
        f"export KOPF_OUTCOMES_RESTRICTED_KUBECONFIG={state / 'restricted.kubeconfig'}",
    ]

    down = runner.invoke(main, ["cluster", "down"])
    assert down.exit_code == 0, down.output
    assert not any(pid_alive(pid) for pid in pids)
    assert not state.exists()
    assert runner.invoke(main, ["cluster", "status"]).exit_code == 1
