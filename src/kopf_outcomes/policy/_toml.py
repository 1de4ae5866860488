"""tomllib, or tomli before Python 3.11: the one place that knows which."""
from __future__ import annotations

import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - depends on the Python version
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

TOMLDecodeError = tomllib.TOMLDecodeError


def loads(text: str) -> dict[str, Any]:
    document: dict[str, Any] = tomllib.loads(text)
    return document


def loads_or_none(text: str) -> dict[str, Any] | None:
    """The parsed text, or None if it is not a TOML document on its own."""
    try:
        return loads(text)
    except (TOMLDecodeError, RecursionError):
        return None
