"""
Near misses of a policy's spelling that TOML itself accepts: a pyproject table spelt with an
underscore, and an exception's dotted name left unquoted (TOML splits a bare key at its dots, so
``[exceptions.kopf.TemporaryError]`` is a table ``kopf`` holding a table ``TemporaryError``).
"""
from __future__ import annotations

import difflib
from collections.abc import Collection, Iterator, Mapping


def nearest_table(tool: Mapping[str, object], wanted: str) -> str | None:
    """The ``[tool.*]`` table that is probably ``wanted`` misspelt (``kopf_outcomes``), or None."""
    tables = [name for name, value in tool.items() if isinstance(value, dict)]
    normal = {name.replace("_", "-").lower(): name for name in tables}
    if wanted in normal:
        return normal[wanted]
    guess = difflib.get_close_matches(wanted, tables, n=1, cutoff=0.8)
    return guess[0] if guess else None


def split_names(name: str, value: object, rule_keys: Collection[str]) -> list[str]:
    """The dotted exception names that TOML split into nested tables under ``name``; none if
    ``value`` is a rule (or anything else than tables of tables down to the rules)."""
    return list(_leaves(name, value, rule_keys))


def _leaves(name: str, value: object, rule_keys: Collection[str]) -> Iterator[str]:
    if not isinstance(value, dict) or not value or any(key in rule_keys for key in value):
        return
    if not all(isinstance(item, dict) for item in value.values()):
        return
    for key, item in value.items():
        deeper = list(_leaves(f"{name}.{key}", item, rule_keys))
        yield from deeper if deeper else [f"{name}.{key}"]


def quote_hint(scope: str, dotted: str) -> str:
    """The message for one split name: quote the key."""
    return (f"the exception name {dotted!r} was read as nested tables (TOML splits a bare key at its "
            f"dots): quote the key, as [{scope}\"{dotted}\"]")
