"""A delete handler whose outcome is chosen by ``spec.onDelete``, for the observability e2e tests."""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", backoff=1)
def delete_fn(spec: kopf.Spec, **_: Any) -> object:
    mode = spec.get("onDelete", "success")
    if mode == "pending":
        return kopf_outcomes.Pending("waiting for the external system")
    if mode == "retry":
        raise kopf_outcomes.Retry("the external system is busy", delay=float(spec.get("delay", 3)), level="WARNING")
    if mode == "fatal-retain":
        raise kopf_outcomes.Fatal("the external system lost the record", on_delete="retain")
    if mode == "fatal":
        raise kopf_outcomes.Fatal("the external system refused")
    return kopf_outcomes.Success()
