"""Building runs and deciding them through the real engine, with a policy plugin registered."""

from __future__ import annotations

import logging

from kopf_outcomes import engine
from kopf_outcomes.manager import PluginManager as Plugins
from kopf_outcomes.outcomes import Outcome
from kopf_outcomes.policy import Policy, PolicyPlugin, loads_policy
from kopf_outcomes.runs import HandlerRun, ResourceRef

KOPFEXAMPLES = ResourceRef(
    group="kopf.dev", version="v1", plural="kopfexamples", kind="KopfExample"
)


BODY = {"metadata": {"name": "example", "namespace": "default"}}


def plugins_with(policy: Policy | str) -> Plugins:
    plugins = Plugins()
    plugin = PolicyPlugin(loads_policy(policy) if isinstance(policy, str) else policy)
    plugins.register(plugin, name="kopf_outcomes.policy")
    return plugins


def run_of(
    plugins: Plugins,
    *,
    handler_id: str = "fn",
    resource: ResourceRef | None = None,
    retry: int = 0,
    runtime: float = 0.0,
    errors_mode: str = "TEMPORARY",
    backoff: float = 60.0,
    reason: str | None = "update",
) -> HandlerRun:
    return HandlerRun(
        handler_id=handler_id,
        reason=reason,
        resource=resource,
        body=BODY,  # a run for an object: a failing plugin would show as a PluginFailure
        retry=retry,
        runtime=runtime,
        deleting=False,
        options=plugins.options(handler_id, resource),
        logger=logging.getLogger("test"),
        errors_mode=errors_mode,
        backoff=backoff,
    )


def decide(
    policy: Policy | str,
    *,
    exception: Exception | None = None,
    result: object = None,
    **run: object,
) -> Outcome | None:
    """The engine's decision for one run under the policy; None means "stock Kopf, unchanged"."""
    plugins = plugins_with(policy)
    handler_run = run_of(plugins, **run)  # type: ignore[arg-type]
    if exception is not None:
        return engine.decide(plugins, handler_run, exception=exception)
    return engine.decide(plugins, handler_run, result=result)
