"""The Plugins page's table of hooks and the hook specifications agree: every hook, once, and
"first result" exactly where the spec says ``firstresult=True``."""
from __future__ import annotations

import inspect
import re

from kopf_outcomes import hookspecs
from tests.docs.blocks import ROOT


def specs() -> dict[str, bool]:
    """Each hook's name → whether it stops at the first result."""
    return {name: bool(fn.kopf_outcomes_spec["firstresult"])
            for name, fn in inspect.getmembers(hookspecs, inspect.isfunction) if hasattr(fn, "kopf_outcomes_spec")}


def test_the_plugins_page_lists_every_hook_and_marks_first_result() -> None:
    rows = re.findall(r"^\| `(kopf_outcomes_\w+)\([^`]*\)` \| ([^|]+) \|", (ROOT / "docs" / "plugins.md").read_text(),
                      flags=re.MULTILINE)
    table = {name: "first result" in kind for name, kind in rows}
    assert len(rows) == len(table), "a hook is listed twice"
    assert table == specs()


WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}


def test_the_specs_introduction_counts_the_hooks() -> None:
    intro = hookspecs.__doc__ or ""
    assert f"{WORDS[len(specs())].capitalize()} hooks." in intro
    for name in specs():
        assert f"``{name}``" in intro, f"{name} is not in the module's introduction"


def test_the_specs_introduction_counts_the_steps_of_a_run_and_their_hooks() -> None:
    intro = hookspecs.__doc__ or ""
    steps = re.findall(r"^\d+\. (.*(?:\n   .*)*)", intro, flags=re.MULTILINE)
    in_steps = {name for step in steps for name in re.findall(r"``(kopf_outcomes_\w+)``", step)}
    assert f"A run goes through {WORDS[len(in_steps)]} of them, in {WORDS[len(steps)]} steps:" in intro


def test_the_plugins_page_counts_its_hooks() -> None:
    text = (ROOT / "docs" / "plugins.md").read_text()
    first = sum(specs().values())
    assert f"`kopf_outcomes`: {WORDS[len(specs())]} hooks, {WORDS[first]} of which stop at the first result" \
        in " ".join(text.split())
