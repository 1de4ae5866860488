"""Create and delete handlers whose outcomes are chosen by ``spec.onCreate`` and ``spec.onDelete``."""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()


def outcome(mode: str) -> object:
    if mode == "pending":
        return kopf_outcomes.Pending("waiting for the external system")
    if mode == "retry":
        raise kopf_outcomes.Retry("the external system is busy", delay=30)
    if mode == "fatal-retain":
        raise kopf_outcomes.Fatal("the external system lost the record", on_delete="retain")
    return kopf_outcomes.Success()


@kopf.on.create("kopf.dev", "v1", "kopfexamples")
def create_fn(spec: kopf.Spec, **_: Any) -> object:
    return outcome(spec.get("onCreate", "success"))


@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
def delete_fn(spec: kopf.Spec, **_: Any) -> object:
    return outcome(spec.get("onDelete", "success"))
