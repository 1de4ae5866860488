"""Mistakes in an operator's code that the types catch: each line marked is reported."""
from __future__ import annotations

import kopf_outcomes
from kopf_outcomes import Fatal, Retry


def children() -> list[str]:
    return [child.nmae for child in kopf_outcomes.recall().objects]  # a misspelt field


def outcomes() -> list[kopf_outcomes.Outcome]:
    return [Retry("busy", level="LOUD"),  # no such level
            Fatal("gone", on_delete="keep")]  # no such choice


def memory() -> str:
    previous = kopf_outcomes.recall().previous
    return previous["record"] if previous is not None else ""  # no such key
