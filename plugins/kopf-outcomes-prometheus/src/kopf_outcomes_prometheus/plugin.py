"""
The hook implementations, loaded through the ``kopf_outcomes`` entry point ``prometheus``.

With ``KOPF_OUTCOMES_PROMETHEUS_ADDRESS`` set, ``/metrics`` is served from the operator's
startup (a Kopf startup handler), so that it answers before any object is handled.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import Any

import kopf

from kopf_outcomes import HandlerRun, Outcome, ResourceRef, hookimpl
from kopf_outcomes_prometheus import FAILURES_REPORTED, GONE_REPORTED, OBJECTS_REPORTED, observer, serve
from kopf_outcomes_prometheus.serving import ADDRESS_ENV

STARTUP_HANDLER_ID = "kopf_outcomes_prometheus.serve"


@hookimpl
def kopf_outcomes_observe_outcome(run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]) -> None:
    if run.handler_id != STARTUP_HANDLER_ID:
        observer().outcome(run, outcome)


if OBJECTS_REPORTED:
    @hookimpl
    def kopf_outcomes_observe_object(resource: ResourceRef | None, body: Mapping[str, Any],
                                     waiting: Mapping[str, str]) -> None:
        observer().object(resource, body, waiting)


if GONE_REPORTED:
    @hookimpl
    def kopf_outcomes_object_gone(resource: ResourceRef | None, body: Mapping[str, Any]) -> None:
        observer().gone(body)


if FAILURES_REPORTED:
    @hookimpl
    def kopf_outcomes_plugin_failed(plugin: str) -> None:
        observer().plugin_failed(plugin)


def _serve_on_startup(logger: kopf.Logger, **_: Any) -> None:
    address = os.environ.get(ADDRESS_ENV, "")
    try:
        host, port = serve(address, source=ADDRESS_ENV)
    except ValueError as e:
        raise kopf.PermanentError(str(e)) from e  # the operator does not start half-observed
    logger.info(f"Serving Prometheus metrics on http://{host}:{port}/metrics")


if os.environ.get(ADDRESS_ENV):
    kopf.on.startup(id=STARTUP_HANDLER_ID)(_serve_on_startup)
