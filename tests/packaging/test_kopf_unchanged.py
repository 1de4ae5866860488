"""Installing the runtime wheel changes nothing in Kopf: its login choice and what it imports.

Kopf picks its fallback login from what is importable (pykube, kubernetes, kubernetes-asyncio:
``login_via_*``; none: ``login_with_kubeconfig`` / ``login_with_service_account``), so a
dependency of ours could silently change how an operator authenticates. One fresh virtualenv:
Kopf alone first, then the same with our runtime wheel installed; each time a subprocess
reports Kopf's login handlers and the modules ``import kopf`` loads. (Timings are measured by
``benchmarks/footprint.py``, not asserted here.)
"""
from __future__ import annotations

import json
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
before = set(sys.modules)
import kopf
imported = sorted(set(sys.modules) - before)
if sys.argv[1:] == ["--install"]:
    import kopf_outcomes
    kopf_outcomes.install()
registry = kopf.get_default_registry()
handlers = registry._activities.get_all_handlers()
logins = [h.id for h in handlers if h.activity.value == "authentication"]
print(json.dumps({"logins": logins, "imported": imported}))
"""


def pip(python: Path, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", "--quiet", *args],
                   check=True, capture_output=True, text=True)


def probe(python: Path, tmp_path: Path, *args: str) -> dict[str, list[str]]:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")  # Kopf only checks that KUBECONFIG is set before offering its login
    env = {"KUBECONFIG": str(kubeconfig), "PATH": str(python.parent), "HOME": str(tmp_path)}
    result = subprocess.run([str(python), "-c", PROBE, *args], capture_output=True, text=True, env=env,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data: dict[str, list[str]] = json.loads(result.stdout)
    return data


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    """A virtualenv with only the Kopf of this environment; and the runtime wheel, built."""
    from importlib.metadata import version

    folder = tmp_path_factory.mktemp("fresh")
    venv.create(folder / "venv", with_pip=True)
    python = folder / "venv" / "bin" / "python"
    pip(python, "install", f"kopf=={version('kopf')}")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(folder / "dist"),
                    str(ROOT)], check=True, capture_output=True)
    wheel = next((folder / "dist").glob("kopf_outcomes-*.whl"))
    yield python, wheel, version("kopf")


def test_same_login_and_imports_with_and_without_the_runtime(fresh: tuple[Path, Path, str],
                                                             tmp_path: Path) -> None:
    python, wheel, _ = fresh
    alone = probe(python, tmp_path)
    assert alone["logins"] == ["login_with_kubeconfig"]  # Kopf alone, with KUBECONFIG set

    pip(python, "install", str(wheel))
    installed = probe(python, tmp_path)
    used = probe(python, tmp_path, "--install")  # imported and kopf_outcomes.install()-ed
    assert installed["logins"] == alone["logins"]
    assert used["logins"] == alone["logins"]
    assert installed["imported"] == alone["imported"]  # `import kopf` loads exactly the same
    assert not [m for m in installed["imported"] if m.startswith(("kubernetes", "pykube"))]


SIGNAL = """
import asyncio
from kopf_outcomes.client import signal  # importable without the extra; fails on use
asyncio.run(signal(None, group="kopf.dev", version="v1", plural="kopfexamples", namespace="ns", name="x",
                   status={"deletion": {"state": "done"}}))
"""


def test_client_helper_names_its_extra_when_missing(fresh: tuple[Path, Path, str]) -> None:
    python, wheel, _ = fresh
    pip(python, "install", str(wheel))
    result = subprocess.run([str(python), "-c", SIGNAL], capture_output=True, text=True)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last == ("ImportError: kopf_outcomes.client.signal() needs kubernetes-asyncio, which is not installed:"
                    " pip install 'kopf-outcomes[client]'"), result.stderr
    assert "During handling" not in result.stderr
