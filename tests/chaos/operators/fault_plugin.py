"""
A plugin that fails on purpose, in every hook and every way, for the chaos suite.

Which fault, where: per object by its label ``chaos-fault: <hook>.<kind>`` (for the hooks that
see a run), per process by ``$CHAOS_PROCESS_FAULT`` (``handler_options.<kind>``,
``owned_fields.<kind>``: those are asked once, before any object). A per-run fault strikes at the
rate ``$CHAOS_FAULT_RATE`` from a seeded RNG (``$CHAOS_SEED``); an always-failing decision hook
would keep an object forever, and that is the safe side, not a figure worth measuring.
"""
from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Iterable, MutableMapping
from typing import Any

from kopf_outcomes import HandlerOptions, Outcome, Pending, hookimpl
from kopf_outcomes.runs import Decision, HandlerRun, ResourceRef

WAITING = "waiting for the callback"  # what the handler returns; this plugin reads it as Pending


class Waiting(Exception):
    """What the handler raises on objects labelled ``chaos-style: exception``."""


def strike(kind: str) -> None:
    """Fail in the named way."""
    if kind == "RuntimeError":
        raise RuntimeError("chaos: a plugin bug")
    if kind == "SystemExit":
        raise SystemExit(3)
    if kind == "KeyboardInterrupt":
        raise KeyboardInterrupt
    if kind == "CancelledError":
        raise asyncio.CancelledError
    if kind == "sleep":
        time.sleep(float(os.environ.get("CHAOS_SLEEP", "30")))
        return
    raise ValueError(f"unknown fault kind {kind!r}")


class FaultPlugin:
    """Every hook, each failing when told to."""

    def __init__(self) -> None:
        self.rng = random.Random(int(os.environ.get("CHAOS_SEED", "0")))
        self.rate = float(os.environ.get("CHAOS_FAULT_RATE", "0.5"))
        self.process_fault = os.environ.get("CHAOS_PROCESS_FAULT", "")
        self.slept: set[str] = set()

    def _fault(self, run: HandlerRun, hook: str) -> str | None:
        labels = ((run.body or {}).get("metadata") or {}).get("labels") or {}
        target, _, kind = str(labels.get("chaos-fault", "")).partition(".")
        if target != hook:
            return None
        if kind == "sleep":  # once per object: one long block, then measure the others
            name = str(run.body and run.body.get("metadata", {}).get("name"))
            if name in self.slept:
                return None
            self.slept.add(name)
            return kind
        return kind if self.rng.random() < self.rate else None

    def _run_fault(self, run: HandlerRun, hook: str) -> None:
        kind = self._fault(run, hook)
        if kind is not None and kind != "finalizers":
            strike(kind)

    def _process_fault(self, hook: str) -> None:
        target, _, kind = self.process_fault.partition(".")
        if target == hook:
            strike(kind)

    @hookimpl
    def kopf_outcomes_handler_options(self, handler_id: str, resource: ResourceRef | None) -> HandlerOptions | None:
        self._process_fault("handler_options")
        return None

    @hookimpl
    def kopf_outcomes_owned_fields(self) -> Iterable[str]:
        self._process_fault("owned_fields")
        return ("status.chaosPlugin",)

    @hookimpl
    def kopf_outcomes_classify_result(self, run: HandlerRun, result: object) -> Outcome | None:
        self._run_fault(run, "classify_result")
        return Pending(WAITING) if result == WAITING else None

    @hookimpl
    def kopf_outcomes_classify_exception(self, run: HandlerRun, exception: Exception) -> Outcome | None:
        self._run_fault(run, "classify_exception")
        return Pending(WAITING) if isinstance(exception, Waiting) else None

    @hookimpl
    def kopf_outcomes_adjust_outcome(self, run: HandlerRun, decision: Decision) -> None:
        self._run_fault(run, "adjust_outcome")

    @hookimpl
    def kopf_outcomes_observe_outcome(self, run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]) -> None:
        patch.setdefault("status", {})["chaosPlugin"] = type(outcome).__name__  # an owned field
        if self._fault(run, "observe_outcome") == "finalizers":
            patch.setdefault("metadata", {})["finalizers"] = []  # must be refused, never applied
        else:
            self._run_fault(run, "observe_outcome")
