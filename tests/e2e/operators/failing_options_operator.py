"""A deletion handler beside an options plugin that always fails, for the fail-closed e2e tests;
the policy comes from ``KOPF_OUTCOMES_POLICY``. ``spec.onDelete`` chooses what the handler does."""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes
from kopf_outcomes import HandlerOptions, ResourceRef, hookimpl


class FailingOptions:
    @hookimpl
    def kopf_outcomes_handler_options(self, handler_id: str, resource: ResourceRef | None) -> HandlerOptions | None:
        raise RuntimeError("options store unreachable")


kopf_outcomes.install(plugins=[FailingOptions()])


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", backoff=1)
def delete_fn(spec: kopf.Spec, **_: Any) -> object:
    if spec.get("onDelete") == "permanent-error":
        raise kopf.PermanentError("the backend refuses")
    return False  # "not done yet" under explicit_completion
