"""
Stock Kopf: a deletion waits for its cleanup Job (found by a label with the parent's name),
polling the Jobs with ``TemporaryError(delay=$BENCH_DELAY)`` (default 20 s), as real operators do.
With ``$BENCH_CREATES_JOB`` set, it creates its own Job and writes its status on every run.
"""
from __future__ import annotations

import os
from typing import Any

import kopf
from kubernetes_asyncio import client

from benchmarks.operators import cleanup_jobs, runs

DELAY = float(os.environ.get("BENCH_DELAY", "20"))


@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
async def delete_fn(name: str, namespace: str, status: kopf.Status, **_: Any) -> None:
    runs.record(name)
    listing = await client.BatchV1Api(await cleanup_jobs.own_api()).list_namespaced_job(
        namespace, label_selector=f"{cleanup_jobs.LABEL}={name}")
    phase = cleanup_jobs.phase_of(((job.status.succeeded if job.status else None),
                                   (job.status.failed if job.status else None)) for job in listing.items)
    if cleanup_jobs.CREATES_JOB and not listing.items:
        await cleanup_jobs.create_job(namespace, name)
        phase = cleanup_jobs.CREATED
    if phase == "Deleted":
        return
    await cleanup_jobs.write_phase(namespace, name, status, phase)
    raise kopf.TemporaryError(phase, delay=DELAY)
