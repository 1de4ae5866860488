"""A startup activity that returns a plain Pending: the operator must not hang silently."""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()


@kopf.on.startup()
def wait_for_ever(**_: Any) -> object:
    return kopf_outcomes.Pending("waiting for nothing")
