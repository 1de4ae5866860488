"""Bad input gives a one-line cause and a hint, no traceback, and leaves no process behind."""
from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kopf_outcomes.cli import main


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, ["cluster", *args])


def assert_clean_error(result: Result, *cause_parts: str) -> list[str]:
    """Exit 1 with `error: <cause>` then `hint: ...`; return all stderr lines."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if not line.startswith(
        ("starting ", "a chosen port", "building ", "  ["))]
    assert lines[0].startswith("error: "), lines
    for part in cause_parts:
        assert part in lines[0], lines[0]
    assert lines[1].startswith("hint: "), lines
    return lines


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_assets_not_a_directory(isolated: Path, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path / "nowhere"))
    lines = assert_clean_error(cli("up"), "KUBEBUILDER_ASSETS=", "is not a directory")
    assert len(lines) == 2


def test_assets_without_etcd(isolated: Path, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    assets = tmp_path / "assets"
    assets.mkdir()
    (assets / "kube-apiserver").write_text("")
    (assets / "kube-apiserver").chmod(0o755)
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    lines = assert_clean_error(cli("up"), "has no executable etcd")
    assert len(lines) == 2


def test_no_go_on_path(isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    lines = assert_clean_error(cli("up"), "Go toolchain", "not on PATH")
    assert "install Go" in lines[1]
    assert len(lines) == 2


def test_failing_build_shows_log_tail(failing_go: Path, isolated: Path, tmp_path: Path) -> None:
    result = cli("up")
    lines = assert_clean_error(result, "building kube-apiserver v1.34.4 failed", "go build")
    assert "undefined: fakeSymbol" in result.stderr  # the tail of the build log
    assert "building kube-apiserver v1.34.4 with Go" in result.stderr  # progress was shown
    bin_dir = tmp_path / "cache" / "kopf-outcomes" / "bin" / "v1.34.4"
    assert sorted(p.name for p in bin_dir.iterdir()) == [".build.lock", "kube-apiserver.build.log"]
    assert not [p for p in (tmp_path / "cache" / "kopf-outcomes").iterdir()
                if p.name.startswith("build-")]  # the throw-away module is gone
    assert "k8s.io/api => k8s.io/api v0.34.4" in (bin_dir / "kube-apiserver.build.log").read_text()
    assert len(lines) > 2


def test_given_port_taken(fake_assets: Callable[[str, str], Path], records: Path,
                          taken_port: int) -> None:
    fake_assets("etcd-healthy", "apiserver-failing")
    lines = assert_clean_error(cli("up", "--port", str(taken_port)),
                               f"127.0.0.1:{taken_port}", "not available")
    assert len(lines) == 2
    assert not (records / "etcd.pid").exists()  # nothing was started


def test_given_etcd_port_taken(fake_assets: Callable[[str, str], Path], records: Path,
                               taken_port: int) -> None:
    fake_assets("etcd-healthy", "apiserver-failing")
    assert_clean_error(cli("up", "--etcd-port", str(taken_port)), "etcd client port")
    assert not (records / "etcd.pid").exists()


def test_port_race_is_retried_then_reported(fake_assets: Callable[[str, str], Path],
                                           records: Path) -> None:
    fake_assets("etcd-port-race", "apiserver-failing")
    result = cli("up")
    assert_clean_error(result, "etcd could not listen on 127.0.0.1:", "already in use")
    assert (records / "etcd.attempts").read_text().count("attempt") == 3
    assert "address already in use" in result.stderr  # the log tail


def test_apiserver_failure_stops_etcd(fake_assets: Callable[[str, str], Path],
                                      records: Path, isolated: Path) -> None:
    fake_assets("etcd-healthy", "apiserver-failing")
    result = cli("up")
    assert_clean_error(result, "kube-apiserver exited with code 1 while starting")
    assert "fake apiserver refuses to start" in result.stderr
    assert not pid_alive(int((records / "etcd.pid").read_text()))
    assert not (isolated / "state.json").exists()
    assert cli("status").exit_code == 1


def test_readiness_timeout_stops_everything(fake_assets: Callable[[str, str], Path],
                                            records: Path) -> None:
    fake_assets("etcd-healthy", "apiserver-hanging")
    result = cli("up", "--timeout", "2")
    assert_clean_error(result, "kube-apiserver was not ready within 2s")
    assert not pid_alive(int((records / "etcd.pid").read_text()))
    assert not pid_alive(int((records / "kube-apiserver.pid").read_text()))


def test_down_spares_a_recorded_pid_that_is_not_ours(isolated: Path) -> None:
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        isolated.mkdir(parents=True)
        (isolated / "state.json").write_text(json.dumps({"info": None, "processes": [{
            "name": "etcd", "pid": stranger.pid, "argv": ["/somewhere/etcd", "--name=x"],
            "log": str(isolated / "etcd.log"), "port": 2379}]}))
        result = cli("down")
        assert result.exit_code == 0
        assert stranger.poll() is None  # still running: its command line is not ours
        assert not isolated.exists()
    finally:
        stranger.kill()
        stranger.wait()


def test_status_and_env_fail_when_not_running(isolated: Path) -> None:
    assert cli("status").exit_code == 1
    result = cli("env")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "cluster up" in result.stderr
