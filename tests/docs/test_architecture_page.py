"""docs/explanation/architecture.md names every module of the package, and the layers in the order of
the import-linter contract: a module added, moved or removed cannot leave the page stale unseen."""
from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "explanation" / "architecture.md"
PACKAGE = ROOT / "src" / "kopf_outcomes"
MODULE = re.compile(r"`((?:\w+/)*\w+\.py)`")


def table_rows(heading: str) -> list[list[str]]:
    """The cells of the first table under a heading of the page."""
    section = PAGE.read_text(encoding="utf-8").split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")][2:]  # header and rule left out
    return [[cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]


def test_the_page_names_every_module_of_the_package_and_no_other() -> None:
    named = set(MODULE.findall(PAGE.read_text(encoding="utf-8")))
    modules = {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")}
    assert sorted(modules - named) == [], "modules the page does not name"
    assert sorted(named - modules) == [], "modules the page names that do not exist"


def test_the_layers_are_the_contracts_in_its_order_each_with_its_modules() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    [contract] = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    rows = table_rows("The layers, top to bottom")
    assert [row[0].strip("`") for row in rows] == contract["layers"]
    for layer, modules, _ in rows:
        names = [name.strip() for name in layer.strip("`").split("|")]
        packages = [name for name in names if (PACKAGE / name).is_dir()]
        files = [f"{name}.py" for name in names if name not in packages]
        assert MODULE.findall(modules) == files, f"layer {layer}"
        assert all(f"`{package}/" in PAGE.read_text(encoding="utf-8") for package in packages)
