"""The debug-stuck how-to shows the output of the command it runs: the namespace asked for with
``-n`` is the one the output names."""
from __future__ import annotations

import re

from tests.docs.blocks import ROOT, blocks, following

PAGE = ROOT / "docs" / "howto" / "debug-stuck.md"


def test_why_shows_the_namespace_it_was_asked_about() -> None:
    [command] = [b for b in blocks(PAGE) if b.language == "sh" and "kopf-outcomes why" in b.code]
    asked = re.search(r"kopf-outcomes why (\S+)/(\S+) -n (\S+)", command.code)
    assert asked is not None
    output = following(command)
    assert output is not None and output.language == "text"
    assert output.code.splitlines()[0] == f"kopfexamples.kopf.dev/{asked[2]} in namespace {asked[3]}"
