"""
Loading policies from TOML: a standalone file, or ``[tool.kopf-outcomes]`` in a pyproject.toml.

Reading goes on past the first problem, so that one run reports everything wrong in a file;
the model is then checked as a whole (:mod:`~kopf_outcomes.policy.validation`).
"""
from __future__ import annotations

import datetime
import difflib
import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kopf_outcomes import paths, values
from kopf_outcomes.policy import _toml, near_misses, validation
from kopf_outcomes.policy.errors import KeyPath, PolicyError, Problem, deepest_line, render
from kopf_outcomes.policy.model import (
    OUTCOME_NAMES,
    Backoff,
    Escalation,
    ExceptionRule,
    Levels,
    Policy,
    Scope,
)

PYPROJECT_TABLE = ("tool", "kopf-outcomes")
LEVEL_NAMES = values.LEVEL_NAMES

_INVALID: Any = object()  # a value that was reported as a problem and is left out of the model

Read = Callable[["_Reader", object, KeyPath], Any]


def load_policy(source: Policy | str | os.PathLike[str], *, import_names: bool = True) -> Policy:
    """
    A checked policy from a :class:`Policy`, a TOML file, or a pyproject.toml (its
    ``[tool.kopf-outcomes]`` table). Raises :class:`PolicyError` listing every problem.
    """
    if isinstance(source, Policy):
        problems = validation.check(source, import_names=import_names)
        if problems:
            raise PolicyError("<Policy object>", render("<Policy object>", problems))
        return source
    path = Path(source)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise PolicyError(str(path), [f"{path}: cannot read the policy file: {e}"]) from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:  # located as TOML errors are: by line and column, not byte offset
        line, column = raw.count(b"\n", 0, e.start) + 1, e.start - raw.rfind(b"\n", 0, e.start)
        raise PolicyError(str(path), [f"{path}, line {line}: not UTF-8: byte {raw[e.start]:#04x} at column "
                                      f"{column} ({e.reason}); a TOML file is UTF-8"]) from e
    return loads_policy(text, source=str(path), pyproject=path.name == "pyproject.toml", import_names=import_names)


def loads_policy(text: str, *, source: str = "<string>", pyproject: bool = False,
                 import_names: bool = True) -> Policy:
    """A checked policy from TOML text; ``source`` names it in messages. ``import_names``: see
    :func:`~kopf_outcomes.policy.validation.check`."""
    try:
        document = _toml.loads(text)
    except (_toml.TOMLDecodeError, RecursionError) as e:
        message = str(e) if isinstance(e, _toml.TOMLDecodeError) else "arrays or tables nested too deeply"
        found = re.search(r"at line (\d+)", message)
        line = (found.group(1) if found
                else text.count("\n") + 1 if "at end of document" in message
                else deepest_line(text) if isinstance(e, RecursionError) else None)
        head = f"{source}, line {line}" if line is not None else source
        raise PolicyError(source, [f"{head}: TOML syntax error: {message}"]) from e
    except ValueError:  # numbers of over 4,300 digits: Python refuses to convert them
        digits = re.search(r"[0-9_]{4000,}", text)
        line = text.count("\n", 0, digits.start()) + 1 if digits else None
        head = f"{source}, line {line}" if line is not None else source
        raise PolicyError(source, [f"{head}: a number too long to read (over 4,300 digits)"]) from None
    prefix: KeyPath = ()
    if pyproject:
        prefix = PYPROJECT_TABLE
        tool = document.get("tool")
        table = tool.get("kopf-outcomes") if isinstance(tool, dict) else None
        if table is None:
            near = near_misses.nearest_table(tool, PYPROJECT_TABLE[1]) if isinstance(tool, dict) else None
            spelt = f"; found [tool.{near}] (did you mean [tool.kopf-outcomes]?)" if near else ""
            raise PolicyError(source, [f"{source}: no [tool.kopf-outcomes] table: "
                                       f"the policy of a pyproject.toml lives there{spelt}"])
        document = table
    reader = _Reader()
    policy = reader.policy(document)
    problems = reader.problems + validation.check(policy, import_names=import_names)
    if problems:
        raise PolicyError(source, render(source, problems, text, prefix))
    return policy


class _Reader:
    """Turns parsed TOML into the model, collecting problems instead of stopping at one."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def wrong(self, value: object, path: KeyPath, expected: str) -> Any:
        self.problems.append(Problem(path, f"expected {expected}, got {_describe(value)}"))
        return _INVALID

    def fields(self, value: object, path: KeyPath, readers: Mapping[str, Read]) -> dict[str, Any]:
        """The known keys of a table, read; unknown keys and wrong values become problems."""
        if not isinstance(value, dict):
            self.wrong(value, path, "a table")
            return {}
        fields = {}
        for name, item in value.items():
            read = readers.get(name)
            if read is None:
                self.problems.append(Problem((*path, name), _unknown(name, readers)))
                continue
            converted = read(self, item, (*path, name))
            if converted is not _INVALID:
                fields[name] = converted
        return fields

    def policy(self, document: object) -> Policy:
        fields = self.fields(document, (), _TOP_READERS)
        handlers = fields.pop("handlers", {})
        resources = fields.pop("resources", {})
        return Policy(defaults=Scope(**fields), handlers=handlers, resources=resources)


def _unknown(name: str, readers: Mapping[str, Read]) -> str:
    message = f"unknown key {name!r}"
    guess = difflib.get_close_matches(name, list(readers), n=1)
    if name in _HINTS:
        message += f" ({_HINTS[name]})"
    elif guess:
        message += f" (did you mean {guess[0]!r}?)"
    return message + f"; allowed here: {', '.join(sorted(readers))}"


_HINTS = {
    "depends_on_objects": "other objects are declared in code, with @kopf_outcomes.depends_on_objects:"
                          " Kopf must watch their resources from the operator's start",
    "handlers": "handlers and resources are tables at the top level only",
    "resources": "handlers and resources are tables at the top level only",
    "pending": "Pending has no level to set: INFO when it begins, DEBUG while unchanged",
}


def _describe(value: object) -> str:
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, (int, float)):
        return f"a number ({values.show(value)})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({json.dumps(shown, ensure_ascii=False)})"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date too
        return f"a date or time ({value.isoformat()})"
    return f"{type(value).__name__}"


# --- readers of values -------------------------------------------------------------------------

def _boolean(reader: _Reader, value: object, path: KeyPath) -> Any:
    return value if isinstance(value, bool) else reader.wrong(value, path, "true or false")


def _number(expected: str) -> Read:
    def read(reader: _Reader, value: object, path: KeyPath) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return reader.wrong(value, path, expected)
        try:
            return float(value)
        except OverflowError:
            return reader.wrong(value, path, f"{expected} that fits a float")
    return read


_seconds = _number("a number of seconds")


def _count(reader: _Reader, value: object, path: KeyPath) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        return reader.wrong(value, path, "a whole number")
    if abs(value) > _MAX_COUNT:  # bounded before any conversion: 5,000 digits do not fit a message
        return reader.wrong(value, path, f"a whole number up to {_MAX_COUNT}")
    return value


_MAX_COUNT = 10**9


def _level(reader: _Reader, value: object, path: KeyPath) -> Any:
    if isinstance(value, str) and value.upper() in LEVEL_NAMES:
        return logging.getLevelName(value.upper())
    return reader.wrong(value, path, f"a level name: {', '.join(LEVEL_NAMES)}")


def _choice(*names: str) -> Read:
    def read(reader: _Reader, value: object, path: KeyPath) -> Any:
        if isinstance(value, str) and value in names:
            return value
        return reader.wrong(value, path, "one of " + ", ".join(f'"{name}"' for name in names))
    return read


def _field_paths(reader: _Reader, value: object, path: KeyPath) -> Any:
    """Field paths: strings (a dot in a key escaped: 'metadata.labels.app\\.kubernetes\\.io/name')
    or arrays of segments, kept in their canonical form (kopf_outcomes.paths); a wrong one is left
    as it is, for the checks to name."""
    if not isinstance(value, list) or not all(
            isinstance(item, str) or (isinstance(item, list) and all(isinstance(part, str) for part in item))
            for item in value):
        return reader.wrong(value, path, 'an array of field paths, such as ["spec.size"]')
    return tuple(_canonical_or_as_is(item) for item in value)


def _canonical_or_as_is(item: str | list[str]) -> str:
    try:
        return paths.canonical(item)
    except ValueError:
        return item if isinstance(item, str) else ".".join(item)


def _table(cls: type[Any], readers: Mapping[str, Read], required: tuple[str, ...] = (),
           partial: bool = False) -> Read:
    """
    A reader of a table that becomes one model object (a dataclass with these fields).

    Unless ``partial``, a table with a wrong field is left out of the model as a whole,
    so that its checks do not repeat the problem in other words.
    """
    def read(reader: _Reader, value: object, path: KeyPath) -> Any:
        before = len(reader.problems)
        fields = reader.fields(value, path, readers)
        for name in required:
            if isinstance(value, dict) and name not in value:
                reader.problems.append(Problem(path, f"the key {name!r} is required here"))
        if len(reader.problems) > before and not (partial and isinstance(value, dict)):
            return _INVALID
        return cls(**fields)
    return read


def _steps(item: Read) -> Read:
    """
    An array of escalation steps. If any step is invalid, the array is left out of the model, and
    the valid steps are checked here, each under its own index (the model's indices would shift).
    """
    def read(reader: _Reader, value: object, path: KeyPath) -> Any:
        if not isinstance(value, list):
            return reader.wrong(value, path, "an array of tables")
        items = [item(reader, element, (*path, index)) for index, element in enumerate(value)]
        if all(element is not _INVALID for element in items):
            return tuple(items)
        for index, element in enumerate(items):
            if element is not _INVALID:
                reader.problems.extend(validation.escalation_step(element, (*path, index)))
        return _INVALID
    return read


def _keyed(item: Read) -> Read:
    def read(reader: _Reader, value: object, path: KeyPath) -> Any:
        if not isinstance(value, dict):
            return reader.wrong(value, path, "a table")
        items = {name: item(reader, element, (*path, name)) for name, element in value.items()}
        return {name: element for name, element in items.items() if element is not _INVALID}
    return read


def _exception_rules(rules: Read) -> Read:
    """The rules by exception name; a name TOML split at its dots is one problem: quote it."""
    def read(reader: _Reader, value: object, path: KeyPath) -> Any:
        if isinstance(value, dict):
            value = dict(value)
            for name, item in list(value.items()):
                for dotted in near_misses.split_names(name, item, _RULE_READERS):
                    scope = "".join(f"{key}." for key in path)
                    reader.problems.append(Problem((*path, name), near_misses.quote_hint(scope, dotted)))
                    value.pop(name, None)
        return rules(reader, value, path)
    return read


_BACKOFF = _table(Backoff, {"base": _seconds, "factor": _number("a number"), "cap": _seconds,
                            "jitter": _number("a fraction from 0 to 1")}, required=("base",))
_ESCALATE = _steps(_table(Escalation, {"after_tries": _count, "after_seconds": _seconds,
                                       "level": _level, "outcome": _choice("fatal")}))
_RULE_READERS: dict[str, Read] = {
    "outcome": _choice(*OUTCOME_NAMES),
    "level": _level,
    "delay": _seconds,
    "backoff": _BACKOFF,
    "escalate": _ESCALATE,
}
_RULE = _table(ExceptionRule, _RULE_READERS, partial=True)
_SCOPE_READERS: dict[str, Read] = {
    "explicit_completion": _boolean,
    "depends_on": _field_paths,
    "remember": _boolean,
    "fatal_on_delete": _choice(*values.FATAL_ON_DELETE),
    "ignore": _field_paths,
    "levels": _table(Levels, {"retry": _level, "fatal": _level}),
    "delay": _seconds,
    "backoff": _BACKOFF,
    "escalate": _ESCALATE,
    "exceptions": _exception_rules(_keyed(_RULE)),
}
_SCOPE = _table(Scope, _SCOPE_READERS, partial=True)
_TOP_ONLY = {"handlers": _keyed(_SCOPE), "resources": _keyed(_SCOPE)}
_TOP_READERS = {**_SCOPE_READERS, **_TOP_ONLY}
