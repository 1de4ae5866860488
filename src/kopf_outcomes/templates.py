"""
Values computed from the parent: ``"{metadata.name}"``, ``"{metadata.namespace}-{spec.cluster}"``.

What ``selected(labels=..., where=...)`` compares its children with. A label value can hold no
brace (Kubernetes allows ``[A-Za-z0-9_.-]`` only), so a brace always marks a placeholder; each
holds a field path of the parent (:mod:`kopf_outcomes.paths`).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kopf_outcomes import paths

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


def is_template(value: object) -> bool:
    return isinstance(value, str) and ("{" in value or "}" in value)


def check(template: str, where: str) -> None:
    """ValueError naming ``where`` for a template that is none: unbalanced braces, bad paths."""
    if _PLACEHOLDER.sub("", template).count("{") or _PLACEHOLDER.sub("", template).count("}"):
        raise ValueError(f"{where}: {template!r} has unbalanced braces: write a placeholder as '{{metadata.name}}'")
    for path in _PLACEHOLDER.findall(template):
        try:
            paths.parse(path)
        except ValueError as e:
            raise ValueError(f"{where}: {template!r}: {e}") from None


def render(template: str, body: Mapping[str, Any]) -> object:
    """The value for this parent: one placeholder alone gives the field's own value (a number
    stays a number); several, or text around one, give a string. None if any field is missing."""
    whole = _PLACEHOLDER.fullmatch(template)
    if whole is not None:
        return paths.resolve(body, whole.group(1))
    found = {path: paths.resolve(body, path) for path in _PLACEHOLDER.findall(template)}
    if any(value is None or isinstance(value, (Mapping, list)) for value in found.values()):
        return None
    return _PLACEHOLDER.sub(lambda match: str(found[match.group(1)]), template)
