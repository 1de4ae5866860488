"""Kopf's test suite for the installed Kopf: its sdist, cached, unpacked, and its test requirements."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from importlib import metadata
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kopf-outcomes"

# Test requirements that only measure or publish coverage, or type-check: not needed to run the tests.
_UNNEEDED = re.compile(r"^(codecov|coverage|pytest-cov|types-.*|mypy|pre-commit|isort)$", re.IGNORECASE)


def installed_kopf() -> str:
    return metadata.version("kopf")


def fetch(version: str) -> Path:
    """The sdist of ``kopf==version``: from the cache, or downloaded into it once (via pip)."""
    sdists = CACHE / "sdists"
    path = sdists / f"kopf-{version}.tar.gz"
    if not path.exists():
        sdists.mkdir(parents=True, exist_ok=True)
        print(f"parity: downloading the sdist of kopf=={version} into {sdists}", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:",
                        "--no-deps", f"kopf=={version}", "-d", str(sdists)], check=True)
        if not path.exists():
            raise SystemExit(f"parity: pip downloaded no {path.name} into {sdists}")
    return path


def unpack(sdist: Path, version: str) -> Path:
    """Kopf's source tree without the ``kopf`` package itself: the installed Kopf is what is tested."""
    root = CACHE / "kopf-suites" / f"kopf-{version}"
    if not (root / "tests").is_dir():
        root.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=root.parent) as tmp:
            with tarfile.open(sdist) as archive:
                if sys.version_info >= (3, 12):
                    archive.extractall(tmp, filter="data")
                else:
                    archive.extractall(tmp)  # noqa: S202 -- PyPI's sdist of Kopf, by exact version
            unpacked = Path(tmp) / f"kopf-{version}"
            if not (unpacked / "tests").is_dir():
                raise SystemExit(f"parity: {sdist} has no tests/ directory")
            shutil.rmtree(unpacked / "kopf")
            shutil.rmtree(root, ignore_errors=True)
            unpacked.rename(root)
    return root


def test_requirements(root: Path) -> list[str]:
    """Kopf's own test requirements: the ``test`` dependency group, or older ``requirements.txt``."""
    pyproject = root / "pyproject.toml"
    lines: list[str] = []
    if pyproject.exists():
        lines = tomllib.loads(pyproject.read_text()).get("dependency-groups", {}).get("test", [])
    if not lines and (root / "requirements.txt").exists():
        lines = (root / "requirements.txt").read_text().splitlines()
    requirements = []
    for line in lines:
        if not isinstance(line, str):  # {include-group = ...}
            continue
        line = line.split("#")[0].strip()
        if not line or line.startswith("-"):
            continue
        name = re.split(r"[\s<>=!~;\[@]", line, maxsplit=1)[0]
        if _UNNEEDED.match(name):
            continue
        # A direct reference (a git URL) becomes the release on PyPI: no network but the registry.
        requirements.append(name if "@" in line and "git+" in line else line)
    return requirements


def install_requirements(requirements: list[str]) -> None:
    print(f"parity: ensuring Kopf's test requirements: {' '.join(requirements)}", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "pytest-xdist", *requirements], check=True)
