"""Fenced code blocks of the Markdown documentation, with where they are, for the tests."""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,})(?P<info>[^`]*)$")


@dataclasses.dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the first line of code, 1-based
    language: str
    flags: tuple[str, ...]  # the words after the language: ```toml invalid
    code: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def documents() -> list[Path]:
    """Every Markdown page of the site, and the README and changelog at the root."""
    pages = [p for p in sorted((ROOT / "docs").rglob("*.md")) if "_build" not in p.parts]
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *pages]


def blocks(path: Path) -> Iterator[Block]:
    """The fenced blocks of one page, dedented; directives (```{name}) are not code."""
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        index += 1
        if opening is None:
            continue
        indent, fence = opening["indent"], opening["fence"]
        info = opening["info"].strip()
        start = index
        while index < len(lines) and not re.match(rf"^ {{0,{len(indent) + 3}}}{fence}`*\s*$", lines[index]):
            index += 1
        body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[start:index]]
        index += 1
        if info and not info.startswith("{"):
            words = info.split()
            yield Block(path, start + 1, words[0], tuple(words[1:]), "\n".join(body) + "\n")


def all_blocks(language: str) -> list[Block]:
    return [block for path in documents() for block in blocks(path) if block.language == language]


def following(block: Block) -> Block | None:
    """The next block on the same page, e.g. the console output of an example."""
    return next((b for b in blocks(block.path) if b.line > block.line), None)
