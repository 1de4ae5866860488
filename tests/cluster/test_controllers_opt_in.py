"""kube-controller-manager is opt-in: who does not ask for it neither needs nor builds it.

Private control planes (their own state folders), so the shared cluster is never touched.
"""
from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from kopf_outcomes.cli import main
from kopf_outcomes_testing.cluster import binaries, control_plane
from tests.cluster.conftest import write_script
from tests.cluster.test_cli_lifecycle import pid_alive

RECORDING_GO = """
import os, sys
with open(os.path.join(os.environ["FAKE_RECORDS"], "go.calls"), "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
raise SystemExit(1)
"""


def pids(state: Path) -> dict[str, int]:
    return {p["name"]: p["pid"] for p in json.loads((state / "state.json").read_text())["processes"]}


def servers_as_assets(folder: Path) -> Path:
    """A KUBEBUILDER_ASSETS folder with the real kube-apiserver and etcd, as envtest's has."""
    real = binaries.find_binaries(lambda _: None, build=False)  # call before replacing the cache
    folder.mkdir()
    (folder / "kube-apiserver").symlink_to(real.kube_apiserver)
    (folder / "etcd").symlink_to(real.etcd)
    return folder


@pytest.fixture
def servers_only(tmp_path: Path, records: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The real servers as KUBEBUILDER_ASSETS, an empty cache, a `go` that records any call."""
    assets = servers_as_assets(tmp_path / "assets")
    gobin = tmp_path / "gobin"
    gobin.mkdir()
    write_script(gobin / "go", RECORDING_GO)
    monkeypatch.setenv("PATH", f"{gobin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("KOPF_OUTCOMES_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("FAKE_RECORDS", str(records))
    yield tmp_path / "state"
    control_plane.stop()


def test_a_start_without_controllers_needs_no_controller_manager(
        servers_only: Path, records: Path, tmp_path: Path) -> None:
    control_plane.ensure_running()  # building allowed: still nothing to build

    assert list(pids(servers_only)) == ["etcd", "kube-apiserver"]
    assert not control_plane.controllers_running()
    with pytest.raises(binaries.BinariesMissing) as missing:  # asked for later: a clear error
        control_plane.ensure_running(controllers=True, build=False)
    assert "kube-controller-manager v1.34.4 is not available" in missing.value.cause
    assert "envtest ships none" in missing.value.cause
    assert "`kopf-outcomes cluster build --controllers`" in missing.value.hint
    assert control_plane.running() is not None  # the cluster is still up
    assert not (records / "go.calls").exists()
    assert not (tmp_path / "cache" / "kopf-outcomes" / "bin").exists()


def test_missing_controller_manager_fails_before_anything_starts(servers_only: Path) -> None:
    with pytest.raises(binaries.BinariesMissing):
        control_plane.ensure_running(controllers=True, build=False)
    assert not (servers_only / "state.json").exists()


def test_started_next_to_the_servers_restarted_alone_stopped_with_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binaries.find_controller_manager(lambda _: None, build=False)  # built by scripts/bootstrap
    state = tmp_path / "state"
    monkeypatch.setenv("KOPF_OUTCOMES_STATE_DIR", str(state))
    runner = CliRunner()
    try:
        assert runner.invoke(main, ["cluster", "up"]).exit_code == 0
        servers = pids(state)
        up = runner.invoke(main, ["cluster", "up", "--controllers"])
        assert up.exit_code == 0, up.output
        assert "starting etcd" not in up.stderr
        started = pids(state)
        assert list(started) == ["etcd", "kube-apiserver", "kube-controller-manager"]
        assert {k: started[k] for k in servers} == servers  # the servers kept running
        assert "with kube-controller-manager" in runner.invoke(main, ["cluster", "status"]).stdout

        os.kill(started["kube-controller-manager"], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while control_plane.controllers_running():  # until the kill is seen (and reaped)
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert "with kube-controller-manager" not in runner.invoke(main, ["cluster", "status"]).stdout
        again = runner.invoke(main, ["cluster", "up", "--controllers"])
        assert again.exit_code == 0, again.output
        restarted = pids(state)
        assert {k: restarted[k] for k in servers} == servers
        assert restarted["kube-controller-manager"] != started["kube-controller-manager"]
    finally:
        assert runner.invoke(main, ["cluster", "down"]).exit_code == 0
    assert not any(pid_alive(pid) for pid in restarted.values())
