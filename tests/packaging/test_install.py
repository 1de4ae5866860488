"""docs/installation.md, literally: ``scripts/dist`` builds every wheel into one folder, and the
documented ``pip install --find-links`` commands install them into a fresh virtualenv outside the
checkout, where the commands run.

The commands are read from the page (its ``sh install-from-checkout`` and
``sh install-plugins-from-checkout`` blocks) and run as written, in bash, in an empty folder;
only the wheels' folder (``~/kopf-outcomes/dist`` on the page) is this test's own. The packages'
dependencies come from the index (pip's cache makes a second run fast).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.docs.blocks import ROOT, Block, blocks

PAGE = ROOT / "docs" / "installation.md"
DOCUMENTED_FOLDER = "~/kopf-outcomes/dist"


def documented(flag: str) -> Block:
    found = [b for b in blocks(PAGE) if b.language == "sh" and flag in b.flags]
    assert len(found) == 1, f"{PAGE.name}: expected one ```sh {flag} block, found {len(found)}"
    return found[0]


def clean_env() -> dict[str, str]:
    """The environment of a new terminal: no virtualenv of this project active, nothing of it on paths,
    none of its settings (tests/e2e/conftest.py sets KOPF_OUTCOMES_PLUGINS="" for the whole session)."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"} and not k.startswith("KOPF_OUTCOMES_")}
    venv_bin = str(Path(sys.prefix) / "bin")
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != venv_bin)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run_documented(block: Block, folder: Path, wheels: Path, env: dict[str, str]) -> str:
    assert DOCUMENTED_FOLDER in block.code, f"{block.where}: the commands no longer use {DOCUMENTED_FOLDER}"
    script = block.code.replace(DOCUMENTED_FOLDER, str(wheels))
    if ". .venv/bin/activate" not in script:  # a later block, in the same terminal
        script = ". .venv/bin/activate\n" + script
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=folder, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{block.where} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_the_documented_installation_from_a_checkout(tmp_path: Path, dist_wheels: Path) -> None:
    assert shutil.which("bash") is not None
    wheels = dist_wheels
    names = sorted(w.name.split("-")[0] for w in wheels.glob("*.whl"))
    assert names == ["kopf_outcomes", "kopf_outcomes_conditions", "kopf_outcomes_prometheus",
                     "kopf_outcomes_testing"]

    project = tmp_path / "operator"
    project.mkdir()
    assert not project.resolve().is_relative_to(ROOT)
    env = clean_env()
    help_text = run_documented(documented("install-from-checkout"), project, wheels, env)
    for command in ("check-policy", "explain", "plugins", "why", "stuck", "cluster"):
        assert f"  {command} " in help_text, f"`{command}` missing from kopf-outcomes --help:\n{help_text}"

    python = project / ".venv" / "bin" / "python"
    where = subprocess.run(
        [python, "-c", "import kopf_outcomes, kopf_outcomes.client, kopf_outcomes_testing, kubernetes_asyncio;"
                       " print(kopf_outcomes.__file__)"],
        cwd=project, env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(project / ".venv"), f"imported from {where}, not the new virtualenv"
    kubectl_plugin = subprocess.run([project / ".venv" / "bin" / "kubectl-outcomes", "--help"],
                                    cwd=project, env=env, capture_output=True, text=True)
    assert kubectl_plugin.returncode == 0 and "why" in kubectl_plugin.stdout, kubectl_plugin.stderr

    plugins = run_documented(documented("install-plugins-from-checkout"), project, wheels, env)
    assert "conditions " in plugins and "prometheus " in plugins, plugins
