"""A parked deletion handler under a custom progress storage ($STORAGE: "status" keeps the
progress in status.my-op.progress; "annotations" under the prefix my-op.example.com)."""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    if os.environ.get("STORAGE") == "status":
        settings.persistence.progress_storage = kopf.StatusProgressStorage(field="status.my-op.progress")
    else:
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="my-op.example.com")
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix="my-op.example.com")


@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
def delete_fn(**_: Any) -> object:
    return kopf_outcomes.Pending("waiting for the callback")
