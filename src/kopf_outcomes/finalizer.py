"""
The finalizer guard's rule: what a final failure of a handler does to its object's finalizer.

Stock Kopf releases the finalizer when a deletion handler ends for good: a ``PermanentError``,
``retries=`` or ``timeout=`` exhausted, an arbitrary exception under ``errors=PERMANENT``, and
our ``Fatal``. ``fatal_on_delete="retain"`` (the outcome's own choice, else the handler's
options or a policy) keeps it until a person releases the object. Every one of those paths
asks this rule, once, at the Kopf boundary (``_kopf/guard.py``); plugins ask it too.
"""
from __future__ import annotations

from kopf_outcomes.kinds import Kind
from kopf_outcomes.options import HandlerOptions
from kopf_outcomes.values import FatalOnDelete

__all__ = ["retains"]


def retains(kind: Kind | str, reason: str | None, on_delete: FatalOnDelete | None,
            options: HandlerOptions) -> bool:
    """Whether a final failure keeps the finalizer: only where Kopf keeps one for the handler
    (a deletion handler, or a sub-handler of one), by the outcome's choice, else the options'."""
    return (reason == "delete" and Kind(kind).persists
            and (on_delete or options.fatal_on_delete or "release") == "retain")
