"""
Outcomes that reach stock Kopf — ``kopf_outcomes.install()`` was never called — must fail loudly
and never read as success, on any handler, in any ``errors=`` mode:

- raised, an outcome is a ``kopf.TemporaryError`` to stock Kopf: retried, never success or failure,
  and its message (``str()``) names ``install()`` while it is inside a handler Kopf invoked;
- returned, Kopf deep-copies it into the object's status, and the copy raises
  :class:`~kopf_outcomes.errors.OutcomeMisreadError`: the cycle fails before its PATCH (so the
  finalizer stays) and Kopf logs the error, naming ``install()``, on every attempt.

With the patch installed, outcomes never reach Kopf: the wrappers translate them first.
"""
from __future__ import annotations

from collections.abc import Callable

_installed = False


def _never() -> bool:
    return False


_inside_kopf_handler: Callable[[], bool] = _never  # the Kopf boundary tells how to know

HINT = ("kopf_outcomes.install() was not called, so stock Kopf cannot read this outcome; "
        "call it at the import of the operator module")


def installed(flag: bool) -> None:
    global _installed
    _installed = flag


def is_installed() -> bool:
    return _installed


def probe(inside_kopf_handler: Callable[[], bool]) -> None:
    """Set by the Kopf boundary: whether code runs inside a handler that Kopf invoked."""
    global _inside_kopf_handler
    _inside_kopf_handler = inside_kopf_handler


def misread() -> bool:
    """Whether an outcome is being read by stock Kopf right now."""
    return not _installed and _inside_kopf_handler()
