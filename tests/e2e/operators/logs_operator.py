"""A create handler that logs with structured fields, and a delete handler by ``spec.onDelete``."""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()


@kopf.on.create("kopf.dev", "v1", "kopfexamples")
def create_fn(logger: kopf.Logger, **_: Any) -> None:
    # As the core should log an outcome: through the object's logger, with the outcome's fields as
    # extra= (Kopf's ObjectLogger merges them with its own, the object reference, since 1.37 at least).
    fields = {"handler": "create_fn", "outcome": "pending", "reason": "waiting", "recheck": 30.0}
    logger.info("structured probe", extra=fields)


@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
def delete_fn(spec: kopf.Spec, **_: Any) -> object:
    mode = spec.get("onDelete", "success")
    if mode == "pending":
        return kopf_outcomes.Pending("waiting for the external system", recheck=600)
    if mode == "retry":
        raise kopf_outcomes.Retry("the external system is busy", delay=600, level="WARNING")
    if mode == "fatal-retain":
        raise kopf_outcomes.Fatal("the external system lost the record", on_delete="retain")
    return kopf_outcomes.Success()
