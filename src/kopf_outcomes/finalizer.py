"""
The release decision: whether a handler's run may let its object's finalizer go. Every way a
run concludes asks here, at the Kopf boundary (:mod:`kopf_outcomes._kopf.translation`: our
outcomes and Kopf's own), and plugins ask too.

**Fail closed.** Where anything the release depends on failed or is unknown in this run, the
run holds the finalizer, whatever it concluded (:func:`fault` says what, the boundary retries the
handler without end and says so at ERROR): options that a plugin failed to give (it raised or
answered wrongly), a ``Fatal(on_delete=...)`` that is neither "retain" nor "release". Nothing
here falls back to a default that could release.

Otherwise stock Kopf's rule stands: a deletion handler's final failure (a ``PermanentError``,
``retries=`` or ``timeout=`` exhausted, ``errors=PERMANENT``, our ``Fatal``) releases the
finalizer, unless ``fatal_on_delete="retain"`` (the outcome's own choice, else the handler's
options or a policy) keeps it until a person releases the object (:func:`retains`).
"""
from __future__ import annotations

from kopf_outcomes.kinds import Kind
from kopf_outcomes.options import HandlerOptions, UnreadOptions
from kopf_outcomes.values import FATAL_ON_DELETE, FatalOnDelete

__all__ = ["fault", "releasable", "retains"]


def releasable(kind: Kind | str, reason: str | None) -> bool:
    """Whether the run's conclusion can let a finalizer go: where Kopf keeps one for the
    handler (a deletion handler, or a sub-handler of one)."""
    return reason == "delete" and Kind(kind).persists


def fault(kind: Kind | str, reason: str | None, options: HandlerOptions,
          on_delete: object = None) -> str | None:
    """What the release of this run depends on and failed or is unknown (one line: what, and
    how to fix it); None where nothing did, or where the run cannot release anything."""
    if options.__class__ is HandlerOptions and on_delete is None:  # the usual run: nothing to look at
        return None
    if not releasable(kind, reason):
        return None
    if isinstance(options, UnreadOptions):
        return (f"the handler's options could not be read ({'; '.join(options.failures)}): "
                f"fix the plugin, or disable it (KOPF_OUTCOMES_DISABLE_PLUGINS)")
    if on_delete is not None and not _choice(on_delete):
        return (f"the outcome's Fatal(on_delete=...) is {on_delete!r}, neither "
                f"{' nor '.join(map(repr, FATAL_ON_DELETE))} (set after the outcome was made, by the "
                f"handler or a plugin's kopf_outcomes_adjust_outcome): set one of those")
    return None


def retains(kind: Kind | str, reason: str | None, on_delete: FatalOnDelete | None,
            options: HandlerOptions) -> bool:
    """Whether a final failure keeps the finalizer: only where Kopf keeps one for the handler,
    by the outcome's choice, else the options'. A choice that is neither "retain" nor "release"
    keeps it too (:func:`fault` names it): never read as the default, which releases."""
    if not releasable(kind, reason):
        return False
    if on_delete is not None:
        return on_delete == "retain" or not _choice(on_delete)
    return options.fatal_on_delete == "retain" or isinstance(options, UnreadOptions)


def _choice(value: object) -> bool:
    return value.__class__ is str and value in FATAL_ON_DELETE
