"""A delete handler that fails temporarily every ``spec.delay`` seconds, as a Retry at WARNING
or, without kopf-outcomes (``INSTALL_KOPF_OUTCOMES=0``), as stock Kopf's TemporaryError; log
records are posted as Events ("posting on": Kopf >= 1.45 posts them only when asked)."""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes

if os.environ.get("INSTALL_KOPF_OUTCOMES", "1") == "1":
    kopf_outcomes.install(entry_points=False)


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    if hasattr(settings.posting, "loggers"):
        settings.posting.loggers = True
    level = os.environ.get("POSTING_LEVEL")
    if level:
        settings.posting.level = int(level)


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", backoff=1)
def delete_fn(spec: kopf.Spec, **_: Any) -> object:
    delay = float(spec.get("delay", 1))
    if os.environ.get("INSTALL_KOPF_OUTCOMES", "1") == "1":
        raise kopf_outcomes.Retry("the external system is busy", delay=delay, level="WARNING")
    raise kopf.TemporaryError("the external system is busy", delay=delay)
