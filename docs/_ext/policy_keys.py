"""
The ``policy-keys`` directive: the policy reference tables, generated from the policy loader.

The keys, and what values each accepts, are asked of the loader itself through its public
entry point (:func:`kopf_outcomes.policy.loads_policy`): an unknown key makes it list the keys
allowed at that place, and a value of no allowed type makes it say what it expected. Defaults
come from the model's dataclasses (:mod:`kopf_outcomes.policy.model`). Only the meaning of each
key is prose, written in the directive's content as ``key: meaning`` lines; the build fails when
a key in the code has no meaning, a meaning names no key, or a table of the loader is never shown.

    ```{policy-keys} backoff
    base: the first delay
    ...
    ```
"""
from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from collections.abc import Mapping
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from kopf_outcomes.policy import Policy, PolicyError, Scope, loads_policy

logger = logging.getLogger(__name__)

Path = tuple["str | int", ...]
_PROBE = "__probe__"
_NAME = "builtins.Exception"  # a name valid as a handler id, a resource and an exception class
_WRONG = "1979-05-27"  # a TOML date: no key of a policy accepts one


@dataclasses.dataclass(frozen=True)
class Key:
    name: str
    expected: str  # the loader's own words: "a number of seconds", 'one of "retain", "release"'
    default: str
    table: str | None  # the location of its own keys, when it is a table or an array of tables


def _toml(path: Path, leaf: str) -> str:
    """One line of TOML that puts ``leaf`` (TOML text) at ``path``, with inline tables/arrays."""
    text = leaf
    for part in reversed(path[1:]):
        text = f"[{text}]" if isinstance(part, int) else f'{{ "{part}" = {text} }}'
    return f'"{path[0]}" = {text}' if path else text


def _messages(text: str) -> list[str]:
    try:
        loads_policy(text)
    except PolicyError as e:
        return list(e.messages)
    return []


def _allowed(path: Path) -> list[str] | None:
    """The keys the loader allows at ``path``; None when any name is allowed there (a keyed table)."""
    leaf = f"{{ {_PROBE} = 1 }}" if path else f"{_PROBE} = 1"
    text = _toml(path, leaf) if path else leaf
    for message in _messages(text):
        found = re.search(rf"unknown key '{_PROBE}'.*; allowed here: (.*)$", message)
        if found:
            return [name.strip() for name in found.group(1).split(",")]
    return None


def _expected(path: Path) -> str:
    for message in _messages(_toml(path, _WRONG)):
        found = re.search(r": expected (.*), got a date or time", message)
        if found:
            return found.group(1)
    raise RuntimeError(f"the policy loader accepted a date at {path!r}; cannot tell what it expects")


def _model(cls: type[Any] | None, name: str) -> tuple[str, type[Any] | None]:
    """The default of a model field (as shown in the table) and the dataclass it holds, if any."""
    fields = {f.name: f for f in dataclasses.fields(cls)} if cls is not None else {}
    if name not in fields:
        raise RuntimeError(f"the policy key {name!r} is not a field of {cls.__name__ if cls else None}")
    field = fields[name]
    if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
        default = "required"
    elif field.default is None or field.default_factory is not dataclasses.MISSING:
        default = "unset"
    elif dataclasses.is_dataclass(field.default):
        default = "unset"
    else:
        default = f"`{field.default!r}`"
    return default, _held(typing.get_type_hints(cls)[name])


def _held(hint: Any) -> type[Any] | None:
    """The dataclass inside ``X | None``, ``tuple[X, ...]`` or ``Mapping[str, X]``, if any."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType, tuple) or origin is Mapping or (
            isinstance(origin, type) and issubclass(origin, Mapping)):
        for arg in typing.get_args(hint):
            found = _held(arg)
            if found is not None:
                return found
    return None


@functools.cache
def tables() -> dict[str, list[Key]]:
    """Every table of a policy file, by location (``top``, ``handlers.*``, ``backoff``, ...)."""
    found: dict[str, list[Key]] = {}
    by_keys: dict[tuple[str, ...], str] = {}

    def walk(path: Path, location: str, cls: type[Any] | None) -> str:
        names = _allowed(path)
        assert names is not None, path
        if tuple(names) in by_keys:
            return by_keys[tuple(names)]
        by_keys[tuple(names)] = location
        keys: list[Key] = []
        found[location] = keys
        for name in names:
            owner = Policy if cls is Policy and name in {f.name for f in dataclasses.fields(Policy)} else (
                Scope if cls is Policy else cls)
            default, held = _model(owner, name)
            expected = _expected((*path, name))
            table = None
            if expected == "a table" and _allowed((*path, name)) is not None:
                table = walk((*path, name), name, held)
            elif expected == "a table":  # `handlers` and `resources` hold scopes: the `scope` table
                table = walk((*path, name, _NAME), "scope" if held is Scope else f"{name}.*", held)
            elif "array of tables" in expected:
                table = walk((*path, name, 0), f"{name}[]", held)
            keys.append(Key(name, expected, default, table))
        return location

    walk((), "top", Policy)
    return found


class PolicyKeys(SphinxDirective):
    """A table of the keys at one location of a policy file, with their meanings from the content."""

    required_arguments = 1
    has_content = True

    def run(self) -> list[nodes.Node]:
        location = self.arguments[0]
        known = tables()
        if location not in known:
            raise self.error(f"policy-keys: no table {location!r} in a policy; known: {', '.join(known)}")
        keys = known[location]
        if location == "top":  # the top level holds the scope's keys too; show its own only
            scope = {key.name for key in known[keys[[k.name for k in keys].index("handlers")].table or ""]}
            keys = [key for key in keys if key.name not in scope]
        meanings = self._meanings()
        names = [key.name for key in keys]
        for name in sorted(set(names) - set(meanings)):
            logger.warning(f"policy-keys {location}: the key {name!r} has no meaning written here",
                           location=self.get_location())
        for name in sorted(set(meanings) - set(names)):
            logger.warning(f"policy-keys {location}: {name!r} is not a key of this table in the code",
                           location=self.get_location())
        self.env.domaindata.setdefault("policy_keys", {}).setdefault("shown", set()).add(location)
        lines = ["| key | accepts | when unset everywhere | meaning |", "|---|---|---|---|"]
        for key in keys:
            accepts = key.expected.replace("|", "\\|")
            if key.table is not None:
                accepts += f" (its keys: the `{key.table}` table on this page)"
            meaning, _, unset = meanings.get(key.name, "").partition("; unset: ")
            default = unset or ("—" if key.default == "unset" else key.default)
            lines.append(f"| `{key.name}` | {accepts} | {default} | {meaning} |")
        container = nodes.container(classes=["policy-keys"])
        self.state.nested_parse(StringList(lines, source=self.get_source_info()[0]), self.content_offset, container)
        return [container]

    def _meanings(self) -> dict[str, str]:
        meanings: dict[str, str] = {}
        current = None
        for line in self.content:
            found = re.match(r"^(\w+):\s+(.*)$", line)
            if found:
                current = found.group(1)
                meanings[current] = found.group(2).strip()
            elif current is not None and line.strip():
                meanings[current] += " " + line.strip()
        return meanings


def _check_all_shown(app: Sphinx, env: Any) -> None:
    shown = env.domaindata.get("policy_keys", {}).get("shown", set())
    for location in tables():
        if location not in shown:
            logger.warning(f"policy-keys: the policy table {location!r} is in the code but in no "
                           f"policy-keys directive of the documentation")


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("policy-keys", PolicyKeys)
    app.connect("env-check-consistency", _check_all_shown)
    return {"version": "1", "parallel_read_safe": False, "parallel_write_safe": True}
