"""Build every distribution of this repository as an index would get it, and check what users get.

1. wheels and sdists of kopf-outcomes, kopf-outcomes-testing and plugins/* (``python -m build``);
2. ``twine check --strict`` on every artifact;
3. a fresh virtualenv with only the runtime wheel (and its dependencies from the index):
   ``kopf-outcomes --version``, ``python -m kopf_outcomes``, ``check-policy`` on an example, an
   import, the installed distributions listed (and checked: no kubernetes client, no
   cryptography, no testing package);
4. in that virtualenv, ``kopf run`` of the example operator against the local control plane:
   an object is deleted, the handler is Pending, the external system calls back, the object goes.

Run by ``scripts/check-dist`` (in CI after the tests, with the cluster up). Build tools live in
their own virtualenv, not in the project's: they would change what the tests see.
"""
from __future__ import annotations

import argparse
import email
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECTS = [ROOT, ROOT / "testing" / "kopf-outcomes-testing", *sorted((ROOT / "plugins").glob("*/"))]
# What the runtime may bring (the names as pip lists them, normalized); anything else fails.
RUNTIME_ALLOWED = {
    "kopf-outcomes", "kopf", "pluggy", "click", "tomli", "typing-extensions", "python-json-logger",
    "iso8601", "aiohttp", "aiohappyeyeballs", "aiosignal", "async-timeout", "attrs", "frozenlist",
    "multidict", "propcache", "yarl", "idna", "pyyaml", "jsonpatch", "jsonpointer", "pip", "setuptools",
}
FORBIDDEN = {"kubernetes-asyncio", "kubernetes", "pykube-ng", "cryptography", "kopf-outcomes-testing", "psutil"}


def say(message: str) -> None:
    print(f"check-dist: {message}", file=sys.stderr, flush=True)


def run(*argv: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], check=True, text=True, **kwargs)  # type: ignore[call-overload, no-any-return]


def fresh_venv(path: Path) -> Path:
    venv.create(path, with_pip=True, clear=True)
    return path / "bin" / "python"


def tools_python(cache: Path) -> Path:
    """A virtualenv with build and twine, kept between runs."""
    python = cache / "bin" / "python"
    if not python.exists():
        say(f"creating the build tools' virtualenv in {cache}")
        fresh_venv(cache)
    run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "build>=1.2", "twine>=6.1")
    return python


def build_all(tools: Path, out: Path) -> list[Path]:
    for project in PROJECTS:
        say(f"building {project.relative_to(ROOT) if project != ROOT else '.'}")
        run(tools, "-m", "build", "--sdist", "--wheel", "--outdir", out, project, stdout=subprocess.DEVNULL)
    artifacts = sorted(out.iterdir())
    run(tools, "-m", "twine", "check", "--strict", *artifacts)
    for wheel in (a for a in artifacts if a.suffix == ".whl"):
        check_description(wheel)
    return artifacts


RELATIVE_LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)\s]+)\)")


def check_description(wheel: Path) -> None:
    """The description an index shows: present, with an install line, and no relative links."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        description = email.message_from_bytes(archive.read(name)).get_payload()
    assert isinstance(description, str) and "pip install" in description, f"{wheel.name}: no install line"
    relative = RELATIVE_LINK.findall(description)
    assert not relative, f"{wheel.name}: relative links in the description: {relative}"


def runtime_venv(folder: Path, wheel: Path) -> Path:
    python = fresh_venv(folder)
    say(f"installing {wheel.name} alone into a fresh virtualenv")
    run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel)
    return python


def check_runtime(python: Path) -> list[str]:
    """The CLI, an import, and the installed distributions; returns them (name==version)."""
    bin_dir = python.parent
    version = run(bin_dir / "kopf-outcomes", "--version", capture_output=True).stdout.strip()
    assert version.startswith("kopf-outcomes, version "), version
    assert run(python, "-m", "kopf_outcomes", "--version", capture_output=True).stdout.strip() == version
    for policy in sorted((ROOT / "examples" / "policies").glob("*.toml")):
        run(bin_dir / "kopf-outcomes", "check-policy", policy, capture_output=True)
    missing = subprocess.run([bin_dir / "kopf-outcomes", "cluster", "up"], capture_output=True, text=True)
    assert missing.returncode == 2 and "pip install kopf-outcomes-testing" in missing.stderr, missing.stderr
    run(python, "-c", "import kopf_outcomes, kopf_outcomes.client; assert kopf_outcomes.Pending('x').reason == 'x'")
    freeze = run(python, "-m", "pip", "list", "--format=json", "--disable-pip-version-check",
                 capture_output=True).stdout
    installed = {d["name"].lower().replace("_", "-"): d["version"] for d in json.loads(freeze)}
    assert not FORBIDDEN & set(installed), sorted(FORBIDDEN & set(installed))
    unexpected = set(installed) - RUNTIME_ALLOWED
    assert not unexpected, f"the runtime brought more than expected: {sorted(unexpected)}"
    return [f"{name}=={installed[name]}" for name in sorted(installed)]


def check_example_operator(python: Path, project_python: Path) -> None:
    """``kopf run`` of the example operator from the runtime-only virtualenv, on the local cluster."""
    kubeconfig = run(project_python, "-m", "kopf_outcomes", "cluster", "up", capture_output=True).stdout.split()[-1]
    env = {**os.environ, "KUBECONFIG": kubeconfig, "PYTHONPATH": str(ROOT)}
    say("running the example operator with `kopf run` from that virtualenv")
    run(project_python, ROOT / "distribution" / "drive_example.py", "--operator-python", python, env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the built artifacts and virtualenvs")
    args = parser.parse_args()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kopf-outcomes" / "dist-tools"
    work = Path(tempfile.mkdtemp(prefix="kopf-outcomes-dist-"))
    started = time.monotonic()
    try:
        artifacts = build_all(tools_python(cache), work / "dist")
        for artifact in artifacts:
            print(f"artifact {artifact.name} {artifact.stat().st_size / 1024:.1f} KiB")
        wheel = next(a for a in artifacts if a.name.startswith("kopf_outcomes-") and a.suffix == ".whl")
        python = runtime_venv(work / "runtime", wheel)
        for line in check_runtime(python):
            print(f"installed {line}")
        check_example_operator(python, ROOT / ".venv" / "bin" / "python")
    finally:
        if args.keep:
            say(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    say(f"all checks passed in {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    main()
