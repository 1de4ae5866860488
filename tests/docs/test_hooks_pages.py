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


def test_the_specs_introduction_counts_the_hooks() -> None:
    words = {5: "Five", 6: "Six", 7: "Seven", 8: "Eight"}
    intro = hookspecs.__doc__ or ""
    assert f"{words[len(specs())]} hooks." in intro
    for name in specs():
        assert f"``{name}``" in intro, f"{name} is not in the module's introduction"
