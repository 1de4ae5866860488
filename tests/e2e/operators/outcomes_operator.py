"""A delete handler whose outcome is chosen by the object's ``spec.onDelete``, for e2e tests."""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes

if os.environ.get("INSTALL_KOPF_OUTCOMES", "1") == "1":
    kopf_outcomes.install()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # Kopf >= 1.45 posts log records as Events only when asked to; older Kopf always does.
    if hasattr(settings.posting, "loggers"):
        settings.posting.loggers = True


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", backoff=1)
def delete_fn(spec: kopf.Spec, **_: Any) -> object:
    mode = spec.get("onDelete", "success")
    if mode == "pending":
        return kopf_outcomes.Pending("waiting for the test")
    if mode == "pending-recheck":
        raise kopf_outcomes.Pending("rechecking", recheck=1)
    if mode == "pending-recheck-slow":
        return kopf_outcomes.Pending("rechecking slowly", recheck=8)
    if mode == "retry-warning":
        raise kopf_outcomes.Retry("busy", delay=1, level="WARNING")
    if mode == "fatal-retain":
        raise kopf_outcomes.Fatal("broken beyond repair", on_delete="retain")
    if mode == "fatal":
        raise kopf_outcomes.Fatal("broken beyond repair")
    if mode == "temporary-error":
        raise kopf.TemporaryError("stock temporary", delay=1)
    if mode == "plain":  # what a handler returns when kopf-outcomes is gone
        return None
    if mode == "temporary-years":  # stock Kopf's own long delay: never ours to park or wake
        raise kopf.TemporaryError("far away", delay=6 * 365 * 24 * 3600)
    if mode == "temporary-quiet":
        raise kopf.TemporaryError("quiet: waiting", delay=1)
    return kopf_outcomes.Success()


@kopf_outcomes.handler_options(explicit_completion=True)
@kopf.on.delete("kopf.dev", "v1", "kopfexamples", field="spec.explicit", value=kopf.PRESENT, backoff=1)
def explicit_fn(spec: kopf.Spec, **_: Any) -> object:
    return spec["explicit"]
