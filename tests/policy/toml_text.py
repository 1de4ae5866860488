"""Writing generated documents as TOML text, for the property tests (tomllib only reads)."""

from __future__ import annotations

import datetime
import json
import math
from typing import Any


def key(name: str) -> str:
    return json.dumps(name, ensure_ascii=False)


def value(item: Any) -> str:
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, float):
        if math.isnan(item):
            return "nan"
        return ("inf" if item > 0 else "-inf") if math.isinf(item) else repr(item)
    if isinstance(item, int):
        return str(item)
    if isinstance(item, str):
        return json.dumps(item, ensure_ascii=False)
    if isinstance(item, (datetime.date, datetime.time)):
        return item.isoformat()
    if isinstance(item, list):
        return "[" + ", ".join(value(element) for element in item) + "]"
    return (
        "{" + ", ".join(f"{key(name)} = {value(element)}" for name, element in item.items()) + "}"
    )


def document(doc: dict[str, Any], *, headers: bool, path: tuple[str, ...] = ()) -> str:
    """The document as key lines, with tables under ``[headers]`` or all inline."""
    lines, tables = [], []
    for name, item in doc.items():
        if headers and isinstance(item, dict):
            tables.append((name, item))
        else:
            lines.append(f"{key(name)} = {value(item)}")
    for name, item in tables:
        lines.append("[" + ".".join(key(part) for part in (*path, name)) + "]")
        lines.append(document(item, headers=headers, path=(*path, name)))
    return "\n".join(lines) + "\n"
