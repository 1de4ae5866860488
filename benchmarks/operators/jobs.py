"""
kopf-outcomes: the same deletion, parked until one of its own cleanup Jobs changes
(``selected`` with a label computed from the parent), its own status writes left out of its state.
With ``$BENCH_NO_IGNORE`` set, they are not: the handler then wakes itself (shown by the hint).
With ``$BENCH_CREATES_JOB`` set, it creates its own Job and writes its status on every run.
"""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes
from benchmarks.operators import cleanup_jobs, runs

kopf_outcomes.install()

JOBS = kopf_outcomes.selected("batch/v1", "jobs", labels={cleanup_jobs.LABEL: "{metadata.name}"},
                              fields=["status.succeeded", "status.failed"])
OWN_WRITES = None if os.environ.get("BENCH_NO_IGNORE") else ["status.phase", "status.phaseChanged"]


@kopf_outcomes.handler_options(ignore=OWN_WRITES)
@kopf_outcomes.depends_on_objects(JOBS)
@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
async def delete_fn(name: str, namespace: str, status: kopf.Status, **_: Any) -> kopf_outcomes.Outcome:
    runs.record(name)
    jobs = kopf_outcomes.recall().objects
    phase = cleanup_jobs.phase_of(job.fields for job in jobs)
    if cleanup_jobs.CREATES_JOB and not jobs:
        await cleanup_jobs.create_job(namespace, name)
        phase = cleanup_jobs.CREATED
    if phase == "Deleted":
        return kopf_outcomes.Success()
    await cleanup_jobs.write_phase(namespace, name, status, phase)
    return kopf_outcomes.Pending(phase)
