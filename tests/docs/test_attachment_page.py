"""The attachment page's table names every Kopf function the patch replaces, and no other: a wrapper
added or removed without the page is caught here, not by a reader."""
from __future__ import annotations

import re
from pathlib import Path

from kopf_outcomes._kopf.wrappers import Wrappers
from kopf_outcomes.manager import PluginManager

PAGE = Path(__file__).parents[2] / "docs" / "explanation" / "attachment.md"
WORDS = {7: "seven", 8: "eight", 9: "nine", 10: "ten", 11: "eleven", 12: "twelve", 13: "thirteen"}


def wrapped() -> set[str]:
    names = set()
    for owner, attribute in Wrappers(PluginManager()).originals:
        module = owner.__name__.rsplit(".", 1)[-1] if isinstance(owner, type(re)) else (
            f"{owner.__module__.rsplit('.', 1)[-1]}.{owner.__name__}")
        names.add(f"{module}.{attribute}")
    return names


def test_the_table_names_exactly_the_wrapped_functions() -> None:
    text = PAGE.read_text()
    named = set(re.findall(r"^\| `([\w.]+)` \|", text, flags=re.MULTILINE))
    assert named == wrapped()


def test_the_count_in_the_opening_is_the_tables() -> None:
    assert f"({WORDS[len(wrapped())]}, listed below)" in PAGE.read_text()
