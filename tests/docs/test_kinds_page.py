"""docs/reference/kinds.md shows the table that kopf_outcomes.kinds decides by, cell by cell."""
from __future__ import annotations

from pathlib import Path

import pytest

from kopf_outcomes import Fatal, Pending, Retry, Success
from kopf_outcomes.kinds import Effect, Kind, effect_of

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "kinds.md"
COLUMNS = [Success(), Pending("r"), Pending("r", recheck=5), Retry("r"), Fatal("r")]
WORDS = {Effect.DONE: "done", Effect.PARK: "parked", Effect.RECHECK: "rechecked", Effect.SKIP: "skipped",
         Effect.POLL: "polled", Effect.RETRY: "retried", Effect.FAIL: "failed", Effect.REJECT: "rejected",
         Effect.REFUSE: "refused"}


def rows() -> dict[str, list[str]]:
    found = {}
    for line in PAGE.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0].startswith("`") and cells[0] != "`kind`":
            found[cells[0].strip("`")] = cells[1:]
    return found


@pytest.mark.parametrize("kind", list(Kind))
def test_the_page_shows_each_cell_as_decided(kind: Kind) -> None:
    assert rows()[kind.value] == [WORDS[effect_of(kind, outcome)] for outcome in COLUMNS]


def test_every_effect_is_explained_on_the_page() -> None:
    text = PAGE.read_text()
    assert all(f"- **{word}**:" in text for word in WORDS.values())
    assert set(rows()) == {kind.value for kind in Kind}
