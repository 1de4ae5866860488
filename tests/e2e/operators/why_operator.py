"""
Two delete handlers (``spec.onDelete``, ``spec.onCleanup``) and Kopf's progress storage chosen by
the environment (``STORAGE``: annotations or status; ``PREFIX``), for the ``why``/``stuck`` tests.
"""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    prefix = os.environ.get("PREFIX", "kopf.zalando.org")
    storage = os.environ.get("STORAGE", "annotations")
    if storage == "status":
        settings.persistence.progress_storage = kopf.StatusProgressStorage()
    else:
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=prefix)


def outcome(mode: str) -> object:
    if mode == "pending":
        return kopf_outcomes.Pending("waiting for the external system")
    if mode == "retry":
        raise kopf_outcomes.Retry("the external system is busy", delay=600)
    if mode == "fatal-retain":
        raise kopf_outcomes.Fatal("the external system lost the record", on_delete="retain")
    if mode == "fatal":
        raise kopf_outcomes.Fatal("the external system refused")
    return kopf_outcomes.Success()


@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
def delete_fn(spec: kopf.Spec, **_: Any) -> object:
    return outcome(spec.get("onDelete", "success"))


@kopf_outcomes.handler_options(depends_on=["status.deletion"])
@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
def cleanup_fn(spec: kopf.Spec, **_: Any) -> object:
    return outcome(spec.get("onCleanup", "success"))
