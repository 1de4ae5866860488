"""
kopf-outcomes: a deletion that waits for a callback with ``Pending`` — parked until the object
changes, or rechecked every ``$BENCH_RECHECK`` seconds if that is set; or, with
``$BENCH_RETRY`` set, a temporary failure ``Retry(delay=$BENCH_RETRY)`` instead.

    BENCH_RECHECK=60 kopf run --standalone --namespace NS benchmarks/operators/waiting.py
"""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes
from benchmarks.operators import runs
from examples.multistep_deletion.external_system import callback_done

kopf_outcomes.install()

RECHECK = float(os.environ["BENCH_RECHECK"]) if os.environ.get("BENCH_RECHECK") else None
RETRY = float(os.environ["BENCH_RETRY"]) if os.environ.get("BENCH_RETRY") else None


@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
async def delete_fn(name: str, status: kopf.Status, annotations: kopf.Annotations,
                    **_: Any) -> kopf_outcomes.Outcome:
    runs.record(name)
    if callback_done(status, annotations):
        return kopf_outcomes.Success()
    if RETRY is not None:
        return kopf_outcomes.Retry("waiting for the external system to call back", delay=RETRY)
    return kopf_outcomes.Pending("waiting for the external system to call back", recheck=RECHECK)
