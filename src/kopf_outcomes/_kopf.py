"""
The one module that touches Kopf's private internals (an import-linter contract keeps it so).

Kopf's layout used here is stable since 1.35; the supported range is checked at install time
so that an operator on an untested Kopf fails loudly at start instead of misbehaving later.
"""
from __future__ import annotations

from importlib import metadata

from kopf._core.actions import application, execution

__all__ = ["application", "execution", "SUPPORTED", "UnsupportedKopfError", "check_version",
           "default_backoff"]

# The oldest and the newest minor versions of Kopf that the patch was tested with.
SUPPORTED = ((1, 37), (1, 45))


class UnsupportedKopfError(RuntimeError):
    """The installed Kopf is outside the range the patch was tested with."""


def check_version() -> str:
    version = metadata.version("kopf")
    try:
        major_minor = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        raise UnsupportedKopfError(f"kopf-outcomes cannot read the Kopf version {version!r}") from None
    oldest, newest = SUPPORTED
    if not oldest <= major_minor <= newest:
        raise UnsupportedKopfError(
            f"kopf-outcomes supports Kopf {oldest[0]}.{oldest[1]} to {newest[0]}.{newest[1]}.x, "
            f"but Kopf {version} is installed; pin kopf to a supported version "
            f"or upgrade kopf-outcomes."
        )
    return version


def default_backoff(settings: object) -> float:
    """Kopf's backoff for arbitrary exceptions: a setting since 1.38, a constant before."""
    execution_settings = getattr(settings, "execution", None)
    backoff = getattr(execution_settings, "default_backoff", None)
    return float(backoff) if backoff is not None else float(getattr(execution, "DEFAULT_RETRY_DELAY", 60))
