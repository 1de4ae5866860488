"""Two update handlers, the first one slow; with REMEMBER=1 the first one remembers its state."""
from __future__ import annotations

import os
import time
from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()
REMEMBER = os.environ.get("REMEMBER") == "1"


@kopf_outcomes.handler_options(remember=REMEMBER, depends_on=["spec.v"])
@kopf.on.update("kopf.dev", "v1", "kopfexamples")
def slow_fn(spec: kopf.Spec, logger: kopf.Logger, **_: Any) -> None:
    logger.info(f"slow_fn saw v={spec.get('v')}")
    time.sleep(2)


@kopf.on.update("kopf.dev", "v1", "kopfexamples")
def fast_fn(spec: kopf.Spec, logger: kopf.Logger, **_: Any) -> None:
    logger.info(f"fast_fn saw v={spec.get('v')}")
