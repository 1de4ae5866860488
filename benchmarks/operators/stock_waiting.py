"""
Stock Kopf: the same wait, polled with ``TemporaryError(delay=$BENCH_DELAY)`` (default 60 s),
as Kopf users do today.

    BENCH_DELAY=60 kopf run --standalone --namespace NS benchmarks/operators/stock_waiting.py
"""
from __future__ import annotations

import os
from typing import Any

import kopf

from benchmarks.operators import runs
from examples.multistep_deletion.external_system import callback_done

DELAY = float(os.environ.get("BENCH_DELAY", "60"))


@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
async def delete_fn(name: str, status: kopf.Status, annotations: kopf.Annotations, **_: Any) -> None:
    runs.record(name)
    if callback_done(status, annotations):
        return
    raise kopf.TemporaryError("waiting for the external system to call back", delay=DELAY)
