"""
An error that ends the process uncaught is shown as its one-line reason. Under ``kopf run``, an
operator module's ``install()`` runs inside Kopf's loader: the 45 lines of traceback through
Kopf, importlib and pluggy only hid the one line that says which plugin to fix and how.
"""
from __future__ import annotations

import sys
import types


def show_alone(error: BaseException) -> None:
    """If ``error`` ends the process uncaught, print only its type and message (the exit code stays
    1). Any other uncaught error goes to the hook that was there before; code that catches
    ``error`` (tests, a supervisor) sees it unchanged."""
    previous = sys.excepthook

    def excepthook(kind: type[BaseException], value: BaseException, traceback: types.TracebackType | None) -> None:
        if value is error:
            print(f"{kind.__name__}: {value}", file=sys.stderr)
        else:
            previous(kind, value, traceback)

    sys.excepthook = excepthook
