"""The same handler (same id) as a second operator on the same resource: its own finalizer and storages."""
from __future__ import annotations

from typing import Any

import kopf

import tests.chaos.operators.sidefx  # noqa: F401 -- registers delete_fn, the same handler id
from tests.chaos.operators.other_names import FINALIZER, PREFIX


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=PREFIX)
