"""The one error type of the control plane: a cause, a hint and, optionally, a log tail.

Everything that can go wrong for a user (no Go, a wrong ``KUBEBUILDER_ASSETS``, a taken port,
a failed build or start) is raised as :class:`ClusterError`, so that the CLI and the pytest
plugin can show it as a short message instead of a traceback.
"""
from __future__ import annotations


class ClusterError(Exception):
    """A problem the user can act on: ``cause`` says what happened, ``hint`` what to do."""

    def __init__(self, cause: str, hint: str, details: str = "") -> None:
        super().__init__(cause)
        self.cause = cause
        self.hint = hint
        self.details = details

    def __str__(self) -> str:
        text = f"{self.cause}\nhint: {self.hint}"
        if self.details:
            text += "\n" + self.details
        return text


def log_tail(text: str, *, title: str, lines: int = 20) -> str:
    """The last lines of a log, indented, so a failure shows its reason next to the message."""
    tail = text.rstrip("\n").splitlines()[-lines:]
    body = "\n".join(f"    {line}" for line in tail) if tail else "    (empty)"
    return f"--- last lines of {title} ---\n{body}"
