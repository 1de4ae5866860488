"""docs/reference/cli.md documents every command: those of the `kopf-outcomes` group, those that
join it through the ``kopf_outcomes.commands`` entry points, and every console script's."""
from __future__ import annotations

import re

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

import click

from kopf_outcomes.cli import main
from tests.docs.blocks import ROOT

PAGE = ROOT / "docs" / "reference" / "cli.md"


def documented() -> dict[str, str]:
    """``:prog:`` → the object of each ``.. click::`` directive on the page."""
    text = PAGE.read_text(encoding="utf-8")
    found = re.findall(r"^\.\. click:: (\S+)\n\s+:prog: (.+)$", text, flags=re.MULTILINE)
    return {prog.strip(): target for target, prog in found}


def test_every_kopf_outcomes_command_is_documented() -> None:
    pages = documented()
    nested = pages.get("kopf-outcomes") == "kopf_outcomes.cli:main"
    assert nested, "the kopf-outcomes group itself is not documented"
    ctx = click.Context(main)
    static = set(main.commands)  # sphinx-click's `:nested: full` documents these, not the entry points
    for name in main.list_commands(ctx):
        assert name in static or f"kopf-outcomes {name}" in pages, f"`kopf-outcomes {name}` is missing from {PAGE}"


def test_every_console_script_is_documented() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    pages = documented()
    for script, target in scripts.items():
        assert pages.get(script) == target, f"console script {script} ({target}) is missing from {PAGE}"
