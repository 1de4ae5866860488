"""A retaining delete handler, and an observer that fails once as it is told of a release (a
metrics backend down at that moment): the release is retried, never the handler."""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes


class FailsOnTheFirstRelease:
    failed = False

    @kopf_outcomes.hookimpl
    def kopf_outcomes_observe_outcome(self, run: kopf_outcomes.HandlerRun, outcome: kopf_outcomes.Outcome,
                                      patch: Any) -> None:
        if isinstance(outcome, kopf_outcomes.Fatal) and outcome.on_delete == "release" and not self.failed:
            self.failed = True
            raise RuntimeError("the metrics backend is down")


kopf_outcomes.install(plugins=[FailsOnTheFirstRelease()])


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", backoff=2)
def delete_fn(**_: Any) -> object:
    raise kopf_outcomes.Fatal("the backup failed", on_delete="retain")
