"""Stock Kopf behaviours only — no outcome objects — to compare Kopf with and without the patch."""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes

if os.environ.get("INSTALL_KOPF_OUTCOMES") == "1":
    kopf_outcomes.install()

RESOURCE = ("kopf.dev", "v1", "kopfexamples")


@kopf.on.create(*RESOURCE, backoff=1)
def create_fn(spec: kopf.Spec, retry: int, **_: Any) -> object:
    mode = spec.get("mode")
    if mode == "temporary" and retry < 2:
        raise kopf.TemporaryError(f"not yet ({retry})", delay=1)
    if mode == "permanent":
        raise kopf.PermanentError("cannot ever")
    if mode == "arbitrary" and retry < 1:
        raise ValueError("something broke")
    return {"mode": mode, "retry": retry}


@kopf.on.update(*RESOURCE, retries=2, backoff=0.5)
def update_fn(spec: kopf.Spec, **_: Any) -> None:
    if spec.get("mode") == "retries":
        raise ValueError("fails every time")


@kopf.on.create(*RESOURCE, field="spec.subs", value=kopf.PRESENT)
async def parent_fn(spec: kopf.Spec, **_: Any) -> None:
    @kopf.subhandler(id="sub_ok")
    def sub_ok(**_: Any) -> str:
        return "ok"

    @kopf.subhandler(id="sub_temporary", backoff=1)
    def sub_temporary(retry: int, **_: Any) -> None:
        if retry < 1:
            raise kopf.TemporaryError("sub not yet", delay=1)


@kopf.daemon(*RESOURCE, backoff=1, when=lambda spec, **_: spec.get("mode") == "daemon")
async def daemon_fn(retry: int, stopped: kopf.DaemonStopped, **_: Any) -> None:
    if retry < 1:
        raise kopf.TemporaryError("daemon not yet", delay=1)
    if retry < 2:
        raise RuntimeError("daemon broke")
    await stopped.wait()


@kopf.timer(*RESOURCE, interval=1, backoff=1, when=lambda spec, **_: spec.get("mode") == "timer")
def timer_fn(retry: int, **_: Any) -> None:
    if retry < 1:
        raise ValueError("timer broke")


@kopf.on.delete(*RESOURCE, backoff=1)
def delete_fn(spec: kopf.Spec, retry: int, **_: Any) -> None:
    if spec.get("mode") == "temporary" and retry < 1:
        raise kopf.TemporaryError("deleting later", delay=1)
