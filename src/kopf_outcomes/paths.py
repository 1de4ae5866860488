"""
Field paths: the one syntax of every option that names a field of an object (``depends_on``,
``ignore``, the sources' ``field``/``fields``/templates, policies, and what ``why`` shows).

A path is a dotted string, or a list of its segments as Kopf's own ``field=`` takes it. A dot
inside a segment (label and annotation keys) is escaped with a backslash, as in kubectl's
JSONPath:

    "spec.size"                                   -> ("spec", "size")
    r"metadata.labels.app\\.kubernetes\\.io/name"    -> ("metadata", "labels", "app.kubernetes.io/name")
    ["metadata", "labels", "app.kubernetes.io/name"]  (the same path)

Internally a path is kept in its canonical string form (:func:`dotted` of its segments), so
that the memory stores it and ``why`` shows it as the user would write it.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeAlias

Path: TypeAlias = "str | Sequence[str]"  # what users write


def parse(path: Path) -> tuple[str, ...]:
    """The segments of a path; ValueError saying why if it is none (empty segments, a dangling
    backslash, a list with a non-string)."""
    if isinstance(path, str):
        return _parsed(path)
    if isinstance(path, Sequence) and all(isinstance(segment, str) for segment in path):
        segments = list(path)
    else:
        raise ValueError(f"a field path is a dotted string or a list of strings, not {path!r}")
    return _checked(segments, path)


@functools.lru_cache(maxsize=1024)  # on every digest of a handler with depends_on: parsed once
def _parsed(path: str) -> tuple[str, ...]:
    return _checked(_split(path), path)


def _checked(segments: list[str], path: Path) -> tuple[str, ...]:
    if not segments or any(not segment for segment in segments):
        raise ValueError(f"{path!r} is not a field path: use 'spec.size', a dot in a key escaped"
                         " (r'metadata.labels.app\\.kubernetes\\.io/name'), or a list of segments"
                         " (['metadata', 'labels', 'app.kubernetes.io/name'])")
    return tuple(segments)


def dotted(segments: Iterable[str]) -> str:
    """The canonical string of a path: segments joined by dots, their own dots escaped."""
    return ".".join(segment.replace("\\", "\\\\").replace(".", "\\.") for segment in segments)


def canonical(path: Path) -> str:
    """A path as the library keeps it (checked): ``["a.b", "c"]`` -> ``a\\.b.c``."""
    return dotted(parse(path))


def canonical_all(paths: Iterable[Path], where: str) -> tuple[str, ...]:
    """Several paths, checked, each error naming ``where`` they were given."""
    if isinstance(paths, str):
        raise TypeError(f"{where} must be a list of field paths, not a single string")
    found = []
    for path in paths:
        try:
            found.append(canonical(path))
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
    return tuple(found)


def resolve(value: object, path: Path) -> object:
    """The value at a path (None where any segment is missing or not a mapping)."""
    for key in parse(path):
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _split(path: str) -> list[str]:
    segments, current, chars = [], [], iter(path)
    for char in chars:
        if char == "\\":
            escaped = next(chars, None)
            if escaped is None:
                raise ValueError(f"{path!r} is not a field path: it ends with a lone backslash")
            current.append(escaped)
        elif char == ".":
            segments.append("".join(current))
            current = []
        else:
            current.append(char)
    segments.append("".join(current))
    return segments
