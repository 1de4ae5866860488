"""
What woke a handler: the field paths of its state that changed since its last conclusion.

The memory keeps them for the last few runs (``woken_by``), so that ``kopf-outcomes why`` shows
them. A handler woken again and again by the same paths, only to conclude as before, is most
often woken by its own writes through another client (its status written with its own API
client, not through Kopf's patch): it is told once, with the paths and the option that leaves
them out of its state (``ignore``).
"""
from __future__ import annotations

import collections
import json
from collections.abc import Mapping, Sequence
from typing import Any

from kopf_outcomes import bounded, paths
from kopf_outcomes.digest import parts

MAX_PATHS = 6  # per wake-up: what ``why`` shows (more are summed up as "...")
MAX_WAKES = 3  # the wake-ups a record keeps, the latest last
HINT_AFTER = 3  # fruitless wake-ups by the same paths before the hint
_PARTS_LIMIT = 4096
_MORE = "..."

# The parts of each remembered state, by its digest: what a later state is compared with.
# In this process only (after a restart, the first wake-up's paths are unknown: none are kept).
_parts: collections.OrderedDict[str, dict[str, str]] = collections.OrderedDict()
# Fruitless wake-ups by (handler id, paths), and the handlers already told.
_fruitless: collections.Counter[tuple[str, tuple[str, ...]]] = collections.Counter()
_told: set[str] = set()


def remember(digest: str, state: Mapping[str, Any]) -> None:
    """The state a conclusion is about, by the digest its record keeps."""
    bounded.remember(_parts, digest, parts(state), _PARTS_LIMIT)


def changed(digest: str, state: Mapping[str, Any]) -> list[str] | None:
    """The paths in which ``state`` differs from the remembered one (None: that one is unknown)."""
    before = _parts.get(digest)
    if before is None:
        return None
    now = parts(state)
    found = sorted(path for path in before.keys() | now.keys() if before.get(path) != now.get(path))
    return found[:MAX_PATHS] + [_MORE] if len(found) > MAX_PATHS else found


def history(previous: Sequence[Sequence[str]] | None, woke: Sequence[str] | None) -> list[list[str]] | None:
    """The record's ``woken_by``: the previous one's, with this wake-up's paths last."""
    kept = [list(paths) for paths in previous or ()]
    if woke:
        kept = [*kept, list(woke)][-MAX_WAKES:]
    return kept or None


def _literal(path: str) -> str:
    """A path as Python and TOML can take it: a string, or a list of segments if it has an escape."""
    return json.dumps(path) if "\\" not in path else json.dumps(list(paths.parse(path)))


def fruitless(handler_id: str, woke: Sequence[str]) -> str | None:
    """A wake-up by these paths that concluded as before: the hint, the first time it is due."""
    key = (handler_id, tuple(woke))
    if len(_fruitless) >= _PARTS_LIMIT and key not in _fruitless:
        _fruitless.clear()  # bounded: a count starts again
    _fruitless[key] += 1
    if _fruitless[key] < HINT_AFTER or handler_id in _told:
        return None
    _told.add(handler_id)
    listed = ", ".join(_literal(path) for path in woke if path != _MORE)
    return (f"Handler {handler_id!r} was woken {_fruitless[key]} times by a change of {', '.join(woke)} and"
            f" concluded as before each time. If it writes these fields itself (through its own API client,"
            f" not Kopf's patch), leave them out of its state: @kopf_outcomes.handler_options(ignore=[{listed}]),"
            f" or ignore = [{listed}] in its policy. `kopf-outcomes why` shows what woke its recent runs.")
