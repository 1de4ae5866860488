"""Handlers that start a side effect once per state (``recall()``), for e2e tests of the memory.

``writer_fn`` writes its own status through Kopf's patch on every run and rechecks; its second run
fails with a Retry. ``a_fn`` is retained at once; ``b_fn`` waits until ``spec.go`` and is then retained.
"""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()
_runs: dict[str, int] = {}


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", when=lambda spec, **_: spec.get("mode") == "writer")
def writer_fn(patch: kopf.Patch, meta: kopf.Meta, logger: kopf.Logger, **_: Any) -> kopf_outcomes.Outcome:
    memory = kopf_outcomes.recall()
    run = _runs[meta["uid"]] = _runs.get(meta["uid"], 0) + 1
    logger.info(f"run {run}: acted={memory.acted_on_this_state} key={memory.idempotency_key}")
    patch.status["deletion"] = {"run": run}  # its own write: a new value on every run
    if run == 2:
        return kopf_outcomes.Retry("the callback's service is down", delay=1)
    return kopf_outcomes.Pending("waiting for the callback", recheck=1)


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", when=lambda spec, **_: spec.get("mode") == "retained")
def a_fn(**_: Any) -> kopf_outcomes.Outcome:
    return kopf_outcomes.Fatal("a: refused", on_delete="retain")


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", when=lambda spec, **_: spec.get("mode") == "retained")
def b_fn(spec: kopf.Spec, **_: Any) -> kopf_outcomes.Outcome:
    if spec.get("go"):
        return kopf_outcomes.Fatal("b: refused", on_delete="retain")
    return kopf_outcomes.Pending("b: waiting for its turn")
