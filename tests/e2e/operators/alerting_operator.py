"""
A delete handler for the Prometheus alerting test: ``spec.onDelete`` chooses the outcome, and
$ALERTING_ROLE chooses the objects (label ``role``), so that two processes (one with a failing
plugin) serve objects of their own in one namespace.
"""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()
ROLE = os.environ.get("ALERTING_ROLE", "a")
PREFIX = f"{ROLE}.alerting.example.com"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Two operators on one resource: each with its own finalizer and storages."""
    settings.persistence.finalizer = f"{PREFIX}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=PREFIX)


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", labels={"role": ROLE}, backoff=1)
def delete_fn(spec: kopf.Spec, **_: Any) -> object:
    mode = spec.get("onDelete", "success")
    if mode == "pending":
        return kopf_outcomes.Pending("waiting for the external system")
    if mode == "fatal-retain":
        raise kopf_outcomes.Fatal("the external system lost the record", on_delete="retain")
    if mode == "error":  # stock Kopf's way: a Retry logged at ERROR
        raise kopf.TemporaryError("the external system is down", delay=1)
    return kopf_outcomes.Success()
