"""Handlers of every kind whose outcome is chosen by the object's spec, for the e2e tests of the
kind x outcome table (kopf_outcomes.kinds): timers, daemons, sub-handlers, retain on every path,
a handler's own status writes. The event loop's longest stall is logged (``loop lag``)."""
from __future__ import annotations

import asyncio
import datetime
import time
from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()
RESOURCE = ("kopf.dev", "v1", "kopfexamples")
lag = {"max": 0.0}


@kopf.on.startup()
async def watch_the_loop(settings: kopf.OperatorSettings, **_: Any) -> None:
    async def measure() -> None:
        while True:
            started = time.monotonic()
            await asyncio.sleep(0.05)
            lag["max"] = max(lag["max"], time.monotonic() - started - 0.05)

    asyncio.get_running_loop().create_task(measure())


@kopf.timer(*RESOURCE, interval=1, when=lambda spec, **_: "timer" in spec)
def tick(spec: kopf.Spec, logger: kopf.Logger, **_: Any) -> object:
    logger.info(f"loop lag max {lag['max']:.3f}")
    if spec["timer"] == "pending":
        return kopf_outcomes.Pending("nothing to do on this tick")
    return kopf_outcomes.Pending("checking again soon", recheck=2)


@kopf.daemon(*RESOURCE, when=lambda spec, **_: "daemon" in spec)
async def guard(spec: kopf.Spec, **_: Any) -> object:
    if spec["daemon"] == "pending":
        return kopf_outcomes.Pending("waiting for nothing")
    return kopf_outcomes.Pending("restart me soon", recheck=1)


@kopf.on.delete(*RESOURCE, when=lambda spec, **_: spec.get("onDelete") == "children")
async def with_children(**_: Any) -> None:
    async def child(status: kopf.Status, **_: Any) -> object:
        if status.get("callback") == "done":
            return kopf_outcomes.Success()
        return kopf_outcomes.Pending("waiting for the callback")

    await kopf.execute(fns={"child": child})


@kopf_outcomes.handler_options(fatal_on_delete="retain")
@kopf.on.delete(*RESOURCE, retries=1, when=lambda spec, **_: spec.get("onDelete") == "retries")
def exhausted(**_: Any) -> None:
    raise kopf.TemporaryError("the external system keeps failing", delay=1)


@kopf_outcomes.handler_options(fatal_on_delete="retain")
@kopf.on.delete(*RESOURCE, timeout=2, when=lambda spec, **_: spec.get("onDelete") == "timeout")
def timed_out(status: kopf.Status, **_: Any) -> object:
    return kopf_outcomes.Pending("waiting past the timeout")


@kopf_outcomes.handler_options(fatal_on_delete="retain")
@kopf.on.delete(*RESOURCE, errors=kopf.ErrorsMode.PERMANENT, when=lambda spec, **_: spec.get("onDelete") == "bug")
def buggy(**_: Any) -> None:
    raise ValueError("a bug in the handler")


@kopf.on.delete(*RESOURCE, when=lambda spec, **_: spec.get("onDelete") == "status-write")
def writes_status(status: kopf.Status, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> object:
    if status.get("deletion", {}).get("state") == "done":
        return kopf_outcomes.Success()
    memory = kopf_outcomes.recall()
    if not memory.acted_on_this_state:
        logger.info(f"starting the external deletion with key {memory.idempotency_key}")
    patch.status["deletion"] = {"requested": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    return kopf_outcomes.Pending("waiting for the external system to call back")
