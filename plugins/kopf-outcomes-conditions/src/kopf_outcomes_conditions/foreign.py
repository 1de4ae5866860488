"""
``status.conditions`` as other tools may have written it, read defensively: a field this plugin
shares is never a reason to fail the user's handler (a hook that raises is retried, on every run,
deletion included). Entries that are not objects (``["Ready"]``) are kept as they are and passed
over; a field that is not a list (a map of another tool's) is left alone, and no condition is
written to that object. Each object's oddity is logged once, at WARNING.
"""
from __future__ import annotations

import collections
import logging
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger("kopf_outcomes.conditions")  # not Kopf's per-object logger: no Event per run
MAX_WARNED = 1024  # objects remembered as warned about; beyond, the oldest may be warned about again
_warned: collections.OrderedDict[str, None] = collections.OrderedDict()


def conditions(body: Mapping[str, Any], patch: Mapping[str, Any]) -> list[object] | None:
    """The conditions to merge into: this cycle's (in the patch), else the object's; None where the
    field has a shape of another tool's, which is then left as it is."""
    pending = _status_of(patch).get("conditions")
    found = pending if pending is not None else _status_of(body).get("conditions")
    if found is None:
        return []
    if not isinstance(found, list):
        _warn(body, f"status.conditions is a {type(found).__name__}, not a list: no condition is written "
                    f"to it (it is left as another tool wrote it)")
        return None
    odd = [entry for entry in found if not isinstance(entry, dict)]
    if odd:
        _warn(body, f"status.conditions holds {len(odd)} entr{'y' if len(odd) == 1 else 'ies'} that "
                    f"{'is' if len(odd) == 1 else 'are'} not an object ({odd[0]!r}...): kept as they are, "
                    f"and passed over")
    return list(found)


def _status_of(source: Mapping[str, Any]) -> Mapping[str, Any]:
    status = source.get("status")
    return status if isinstance(status, Mapping) else {}


def _warn(body: Mapping[str, Any], problem: str) -> None:
    metadata = body.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    uid = str(metadata.get("uid") or id(body))
    if uid in _warned:
        return
    _warned[uid] = None
    while len(_warned) > MAX_WARNED:
        _warned.popitem(last=False)
    where = "/".join(str(part) for part in (metadata.get("namespace"), metadata.get("name")) if part)
    logger.warning(f"The conditions plugin ignores what it cannot read on {where or 'an object'}: {problem}.")
