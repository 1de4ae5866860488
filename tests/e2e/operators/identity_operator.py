"""
One of several operators on one resource, each with its own Kopf identity: ``OPERATOR_ID=default``
keeps Kopf's finalizer and storage; any other id gets its own finalizer and storage prefix.
All of them have a delete handler with the same id, which starts "its" external cleanup once.
"""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes

OPERATOR_ID = os.environ["OPERATOR_ID"]
kopf_outcomes.install()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    if OPERATOR_ID != "default":
        prefix = f"{OPERATOR_ID}.example.com"
        settings.persistence.finalizer = f"{prefix}/finalizer"
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=prefix)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=prefix)


@kopf_outcomes.handler_options(depends_on=[f"metadata.labels.done-{OPERATOR_ID}"])
@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
def delete_fn(labels: kopf.Labels, logger: kopf.Logger, **_: Any) -> object:
    if labels.get(f"done-{OPERATOR_ID}") == "yes":
        return kopf_outcomes.Success()
    if kopf_outcomes.recall().previous is None:  # the README's idiom: start it once
        logger.info(f"starting the external cleanup of operator {OPERATOR_ID}")
    return kopf_outcomes.Pending("waiting for the external cleanup")
