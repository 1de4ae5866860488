"""
Stock Kopf, the ``wakeups`` scenario: a parent's deletion polls its children (ConfigMaps labelled
``example.com/parent=<parent's name>``) with ``TemporaryError(delay=$BENCH_DELAY)`` until each
one's ``data.state`` is ``done``; children labelled ``example.com/waits=yes`` wait on their own.
"""
from __future__ import annotations

import os
from typing import Any

import kopf
from kubernetes_asyncio import client

from benchmarks.operators import cleanup_jobs, runs

DELAY = float(os.environ.get("BENCH_DELAY", "5"))
PARENT, WAITS = "example.com/parent", "example.com/waits"


@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
async def delete_fn(name: str, namespace: str, **_: Any) -> None:
    runs.record(name)
    listing = await client.CoreV1Api(await cleanup_jobs.own_api()).list_namespaced_config_map(
        namespace, label_selector=f"{PARENT}={name}")
    if any((child.data or {}).get("state") != "done" for child in listing.items):
        raise kopf.TemporaryError("children run", delay=DELAY)


@kopf.on.create("v1", "configmaps", labels={WAITS: "yes"})
def child_waits(**_: Any) -> None:
    raise kopf.TemporaryError("the child waits for something of its own", delay=60)
