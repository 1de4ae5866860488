"""
Policy problems and where they are: every message names the file, the table and the key,
and the line when a scan of the file finds it.

tomllib reports no positions for keys, so lines are found by reading the file's table headers
and ``key = ...`` lines one at a time — each parsed by tomllib itself, never by hand.
"""
from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Sequence

from kopf_outcomes.policy import _toml

KeyPath = tuple[str | int, ...]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing wrong in a policy: where (the key path from the policy's root) and what."""

    path: KeyPath
    message: str


class PolicyError(Exception):
    """An invalid policy. ``messages`` lists every problem found, each one located."""

    def __init__(self, source: str, messages: Sequence[str]) -> None:
        self.source = source
        self.messages = list(messages)
        count = f"{len(self.messages)} problem" + ("s" if len(self.messages) != 1 else "")
        super().__init__(f"invalid kopf-outcomes policy {source} ({count}):\n"
                         + "\n".join(f"  {message}" for message in self.messages))


def key(name: str | int) -> str:
    """A key as TOML writes it: bare when it can be, quoted otherwise."""
    if isinstance(name, int):
        return f"[{name}]"
    return name if _BARE_KEY.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def dotted(path: KeyPath) -> str:
    """A key path in TOML's dotted form; array indices as ``[0]``."""
    text = ""
    for name in path:
        text += key(name) if isinstance(name, int) or not text else f".{key(name)}"
    return text


def where(path: KeyPath) -> str:
    """``[table] key`` for a key path; a top-level key is just ``key``."""
    split = len(path) - 1
    while split > 0 and isinstance(path[split], int):
        split -= 1  # an array item belongs to the key of its array
    table, name = dotted(path[:split]), dotted(path[split:])
    return f"[{table}] {name}" if table else name


def render(source: str, problems: Iterable[Problem], text: str | None = None,
           prefix: KeyPath = ()) -> list[str]:
    """Located messages, in file order; ``prefix`` is where the policy sits in the file."""
    lines = locate(text) if text is not None else {}
    located = []
    for problem in problems:
        path = prefix + problem.path
        line = _line_of(path, lines)
        head = f"{source}, line {line}" if line is not None else source
        located.append((line or 0, f"{head}: {where(path)}: {problem.message}"))
    located.sort(key=lambda pair: pair[0])
    return [message for _, message in located]


def _line_of(path: KeyPath, lines: dict[KeyPath, int]) -> int | None:
    """The line of the key, or of its nearest enclosing key that the scan found."""
    for end in range(len(path), 0, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return None


def locate(text: str) -> dict[KeyPath, int]:
    """The first line of every key path that a header or ``key = ...`` line defines."""
    lines: dict[KeyPath, int] = {}
    arrays: dict[KeyPath, int] = {}  # [[array]] headers seen so far, per array path
    table: KeyPath = ()
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("["):
            header = _toml.loads_or_none(stripped)
            if header is None:
                continue
            table = _header_path(header, arrays)
            for end in range(1, len(table) + 1):
                lines.setdefault(table[:end], number)
        elif "=" in stripped and not stripped.startswith("#"):
            # A value may continue on the next lines; then its key alone tells where it is.
            keyval = (_toml.loads_or_none(stripped)
                      or _toml.loads_or_none(stripped.split("=", 1)[0] + "= 0"))
            for path in _paths(keyval or {}):
                lines.setdefault(table + path, number)
    return lines


def _header_path(header: dict[str, object], arrays: dict[KeyPath, int]) -> KeyPath:
    """The key path of ``[a.b]`` or ``[[a.b]]`` (with the array index), from its parsed form."""
    path: KeyPath = ()
    node: object = header
    while isinstance(node, dict) and len(node) == 1:
        name, node = next(iter(node.items()))
        path += (name,)
        if isinstance(node, list):  # this header is [[path]]: one more item of that array
            arrays[path] = arrays.get(path, 0) + 1
            node = node[0] if node else None
        if path in arrays:
            path += (arrays[path] - 1,)
    return path


def _paths(node: object) -> Iterable[KeyPath]:
    """Every key path in a parsed ``key = value`` line, inline tables and arrays included."""
    if isinstance(node, dict):
        for name, value in node.items():
            yield (name,)
            for sub in _paths(value):
                yield (name, *sub)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield (index,)
            for sub in _paths(value):
                yield (index, *sub)


def deepest_line(text: str) -> int:
    """The line where arrays and inline tables nest deepest (strings and comments left out):
    where a file that the parser cannot descend into goes too deep."""
    depth = deepest = 0
    line = where = 1
    quote = None
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\n":
            line += 1
            if quote is not None and len(quote) == 1:
                quote = None  # a one-line string ends with its line (an error the parser reports)
        elif quote is not None:
            if char == "\\" and quote[0] == '"':
                index += 1
            elif text.startswith(quote, index):
                index += len(quote) - 1
                quote = None
        elif char == "#":
            end = text.find("\n", index)
            index = len(text) if end < 0 else end - 1
        elif char in "\"'":
            quote = char * 3 if text.startswith(char * 3, index) else char
            index += len(quote) - 1
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest, where = depth, line
        elif char in "]}":
            depth -= 1
        index += 1
    return where
