"""The pytest plugin of kopf-outcomes-testing: light when registered, its options, its errors.

Each test runs pytest in a subprocess on a throw-away project, as a user's run would be.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from kopf_outcomes_testing.cluster import ClusterInfo
from tests.cluster.test_controllers_opt_in import servers_as_assets

HEAVY = {"kopf", "kopf_outcomes", "kubernetes_asyncio", "kubernetes", "cryptography", "aiohttp",
         "psutil", "yaml"}


def heavy(module: str) -> bool:
    return module.split(".")[0] in HEAVY or module.startswith("kopf_outcomes_testing.cluster")

MODULES_CONFTEST = """
import json, os, sys

def pytest_sessionfinish(session):
    with open(os.environ["MODULES_OUT"], "w") as f:
        json.dump(sorted(sys.modules), f)
"""


def run_pytest(project: Path, *args: str, env: dict[str, str] | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    # As on a developer's machine: under CI (CI, BUILD_NUMBER) pytest prints the short summary
    # untruncated, which would repeat each error's message once more.
    base = {key: value for key, value in os.environ.items() if key not in ("CI", "BUILD_NUMBER")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=project,
        env={**base, **(env or {})}, capture_output=True, text=True, timeout=timeout)


def project(tmp_path: Path, test: str, conftest: str = "") -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "test_it.py").write_text(textwrap.dedent(test))
    (folder / "conftest.py").write_text(textwrap.dedent(conftest))
    return folder


def test_registration_imports_nothing_heavy(tmp_path: Path) -> None:
    folder = project(tmp_path, "def test_unrelated():\n    assert 1 + 1 == 2\n", MODULES_CONFTEST)
    modules = {}
    for label, extra in (("with", []), ("without", ["-p", "no:kopf_outcomes"])):
        out = tmp_path / f"modules-{label}.json"
        result = run_pytest(folder, "-q", *extra, env={"MODULES_OUT": str(out)})
        assert result.returncode == 0, result.stdout + result.stderr
        modules[label] = set(json.loads(out.read_text()))
    added = modules["with"] - modules["without"]
    assert "kopf_outcomes_testing.pytest_plugin" in added  # it was registered and loaded
    assert not [m for m in added if heavy(m)], sorted(added)
    assert len(added) <= 5, sorted(added)  # the package, its version, the plugin module


def test_options_are_listed_in_help(tmp_path: Path) -> None:
    result = run_pytest(project(tmp_path, "def test_x(): pass\n"), "--help")
    for option in ("--kopf-outcomes-kubeconfig", "--kopf-outcomes-stop-cluster", "--kopf-outcomes-build"):
        assert option in result.stdout


CLUSTER_TEST = """
import os

def test_cluster(k8s_cluster):
    assert os.environ["KUBECONFIG"] == str(k8s_cluster.admin_kubeconfig)
"""


def isolated_env(tmp_path: Path) -> dict[str, str]:
    """A private cache and state folder: no binaries, no running cluster."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "KOPF_OUTCOMES_STATE_DIR": str(tmp_path / "state"),
           "KUBEBUILDER_ASSETS": "", "KOPF_OUTCOMES_KUBECONFIG": "", "KOPF_OUTCOMES_BUILD": ""}
    return env


def test_missing_binaries_fail_once_with_the_build_command(tmp_path: Path) -> None:
    env = isolated_env(tmp_path)
    env["PATH"] = str(tmp_path / "no-go-here") + os.pathsep + os.environ["PATH"]
    result = run_pytest(project(tmp_path, CLUSTER_TEST), "-q", env=env)
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert output.count("are not available") == 1, output  # one error, not chained twice
    assert "During handling of the above exception" not in output
    assert "Traceback" not in output
    assert "`kopf-outcomes cluster build`" in output
    assert "setup-envtest use -p path 1.34.x" in output
    assert "--kopf-outcomes-build" in output
    assert not (tmp_path / "cache" / "kopf-outcomes" / "bin").exists()  # no build was started


def test_missing_controller_manager_fails_only_the_tests_that_ask_for_it(tmp_path: Path) -> None:
    test = """
    def test_plain(k8s_cluster):
        pass

    def test_collected(k8s_controllers):
        pass
    """
    env = {**isolated_env(tmp_path), "KUBEBUILDER_ASSETS": str(servers_as_assets(tmp_path / "assets"))}
    result = run_pytest(project(tmp_path, test), "-q", "--kopf-outcomes-stop-cluster", env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 1
    assert "1 passed, 1 error" in output, output
    assert output.count("kube-controller-manager for the tests is not available") == 1
    assert "`kopf-outcomes cluster build --controllers`" in output
    assert "Traceback" not in output
    assert not (tmp_path / "cache" / "kopf-outcomes" / "bin").exists()  # no build was started
    assert not (tmp_path / "state").exists()  # the session's cluster was stopped


FAILING_GO = """#!{python}
import sys
if sys.argv[1:3] == ["mod", "download"]:
    print("go: the fake Go of this test refuses to download", file=sys.stderr)
    raise SystemExit(1)
"""


def test_build_inside_the_session_only_when_allowed(tmp_path: Path) -> None:
    gobin = tmp_path / "gobin"
    gobin.mkdir()
    (gobin / "go").write_text(FAILING_GO.format(python=sys.executable))
    (gobin / "go").chmod(0o755)
    env = isolated_env(tmp_path)
    env["PATH"] = str(gobin) + os.pathsep + os.environ["PATH"]
    result = run_pytest(project(tmp_path, CLUSTER_TEST), "-q", "--kopf-outcomes-build", env=env)
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert "building kube-apiserver v1.34.4 failed" in output, output  # it did try the build
    assert "refuses to download" in output  # the build log's tail
    assert output.count("building kube-apiserver v1.34.4 failed") == 1


def test_existing_cluster_from_a_kubeconfig(tmp_path: Path, k8s_cluster: ClusterInfo) -> None:
    test = """
    import os

    async def test_namespace_and_client(k8s_cluster, k8s_namespace, k8s_api):
        from kubernetes_asyncio import client
        assert k8s_cluster.state_dir is None and k8s_cluster.restricted_kubeconfig is None
        assert os.environ["KUBECONFIG"] == os.environ["GIVEN"]
        ns = await client.CoreV1Api(k8s_api).read_namespace(k8s_namespace)
        assert ns.metadata.name == k8s_namespace
    """
    env = isolated_env(tmp_path)  # nothing local could be started: the given cluster is used
    env["GIVEN"] = str(k8s_cluster.admin_kubeconfig)
    env["PYTEST_ADDOPTS"] = "--asyncio-mode=auto"
    result = run_pytest(project(tmp_path, test), "-q",
                        f"--kopf-outcomes-kubeconfig={k8s_cluster.admin_kubeconfig}", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (tmp_path / "state").exists()


def test_bad_kubeconfig_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.kubeconfig"
    bad.write_text("apiVersion: v1\nkind: Config\ncurrent-context: nowhere\ncontexts: []\n")
    result = run_pytest(project(tmp_path, CLUSTER_TEST), "-q", env={
        **isolated_env(tmp_path), "KOPF_OUTCOMES_KUBECONFIG": str(bad)})
    output = result.stdout + result.stderr
    assert result.returncode == 1
    assert f"kubeconfig {bad}: no context named 'nowhere'" in output, output
    assert output.count("no context named") == 1


def test_stop_cluster_stops_only_what_the_session_started(tmp_path: Path) -> None:
    state = tmp_path / "state"
    test = """
    import json, os, pathlib

    def test_cluster(k8s_cluster):
        state = json.loads((k8s_cluster.state_dir / "state.json").read_text())
        pathlib.Path(os.environ["PIDS_OUT"]).write_text(json.dumps([p["pid"] for p in state["processes"]]))
    """
    pids_out = tmp_path / "pids.json"
    env = {"KOPF_OUTCOMES_STATE_DIR": str(state), "PIDS_OUT": str(pids_out), "KOPF_OUTCOMES_KUBECONFIG": ""}
    folder = project(tmp_path, test)
    result = run_pytest(folder, "-q", "--kopf-outcomes-stop-cluster", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    pids = json.loads(pids_out.read_text())
    assert len(pids) == 2
    assert not state.exists()  # stopped: its state is removed
    for pid in pids:
        assert not _alive(pid)

    kept = run_pytest(folder, "-q", env=env)  # the default keeps it for the next session
    try:
        assert kept.returncode == 0, kept.stdout + kept.stderr
        assert (state / "state.json").exists()
        kept_pids = json.loads(pids_out.read_text())
        assert all(_alive(pid) for pid in kept_pids)
    finally:
        # Another process than the one that started them finds and stops them (psutil, no /proc).
        subprocess.run([sys.executable, "-m", "kopf_outcomes", "cluster", "down"], env={**os.environ, **env},
                       capture_output=True, check=True)
    assert not any(_alive(pid) for pid in kept_pids)
    assert not state.exists()


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
