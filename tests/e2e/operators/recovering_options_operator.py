"""A deletion handler with ``retries=2`` beside an options plugin that fails while the file named
by ``OPTIONS_DOWN`` exists (the test removes it: the plugin recovers in the running operator); the
policy comes from ``KOPF_OUTCOMES_POLICY``. The handler succeeds whenever it runs."""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes
from kopf_outcomes import HandlerOptions, ResourceRef, hookimpl


class RecoveringOptions:
    @hookimpl
    def kopf_outcomes_handler_options(self, handler_id: str, resource: ResourceRef | None) -> HandlerOptions | None:
        if os.path.exists(os.environ["OPTIONS_DOWN"]):
            raise RuntimeError("options store unreachable")
        return None


kopf_outcomes.install(plugins=[RecoveringOptions()])


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", retries=2, backoff=0.5)
def delete_fn(**_: Any) -> None:
    return None
