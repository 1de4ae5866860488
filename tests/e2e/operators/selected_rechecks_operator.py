"""A shard selected on the API server (Kopf 1.45's settings.watching.label_selectors) whose handler
rechecks every second: issue 42's cost, a LIST per object per recheck."""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()

SHARD_LABEL = "kopf-outcomes.example.com/shard"


@kopf.on.startup()
def select_on_the_server(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.watching.label_selectors["kopf.dev", "kopfexamples"] = f"{SHARD_LABEL}=a"


@kopf.on.create("kopf.dev", "v1", "kopfexamples", labels={SHARD_LABEL: "a"})
def create_fn(logger: kopf.Logger, **_: Any) -> object:
    logger.info("Checked the external system.")
    return kopf_outcomes.Pending("waiting for the external system", recheck=1)
