"""A deletion handler whose own status write the API server prunes (``prunedexamples``: its status
schema has ``status.kopf`` and no ``status.deletion``), for the e2e test of once per state.

``deletion_fn`` starts its side effect once per state (``recall()``), writes ``status.deletion`` and
waits for a change (parked); with ``spec.go`` it succeeds.
"""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()
_runs: dict[str, int] = {}


@kopf.on.delete("kopf.dev", "v1", "prunedexamples")
def deletion_fn(spec: kopf.Spec, patch: kopf.Patch, meta: kopf.Meta, logger: kopf.Logger,
                **_: Any) -> kopf_outcomes.Outcome:
    memory = kopf_outcomes.recall()
    run = _runs[meta["uid"]] = _runs.get(meta["uid"], 0) + 1
    logger.info(f"run {run}: acted={memory.acted_on_this_state} key={memory.idempotency_key}")
    patch.status["deletion"] = {"requested": True}  # not in the schema: the API server drops it
    if spec.get("go"):
        return kopf_outcomes.Success()
    return kopf_outcomes.Pending("waiting for the callback")
