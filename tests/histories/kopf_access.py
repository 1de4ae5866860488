"""
The Kopf-private names the generated histories need, in one place (as tests/unit/kopf_objects.py
is for the unit tests): when Kopf moves them, this file is what follows.
"""
from __future__ import annotations

import contextvars
import importlib.metadata
from typing import Any

from kopf._cogs.aiokits import aiotime
from kopf._cogs.clients import api
from kopf._cogs.clients import errors as api_errors
from kopf._cogs.configs import configuration
from kopf._cogs.structs import ephemera, references
from kopf._core.engines import indexing
from kopf._core.reactor import inventory, processing

__all__ = ["JSON_PATCHED_RELEASE", "RESOURCE", "aiotime", "api", "configuration", "ephemera", "error", "indexing",
           "inventory", "processing"]

RESOURCE = references.Resource("kopf.dev", "v1", "kopfexamples", namespaced=True)

# Kopf >= 1.38 removes the finalizer with a JSON patch tested against the view's resourceVersion;
# before, with a merge patch (untested): there an old view's removal lands at once.
JSON_PATCHED_RELEASE = tuple(int(part) for part in importlib.metadata.version("kopf").split(".")[:2]) >= (1, 38)


def error(cls: type[api_errors.APIError], code: int, message: str) -> api_errors.APIError:
    """Kopf's error for an HTTP status, as its API client raises it (Kopf 1.37 takes no headers)."""
    payload: Any = {"message": message, "code": code}
    try:
        return cls(payload, status=code, headers={})
    except TypeError:
        return cls(payload, status=code)  # type: ignore[call-arg]


def not_found() -> api_errors.APIError:
    return error(api_errors.APINotFoundError, 404, "not found")


def unprocessable(message: str) -> api_errors.APIError:
    return error(api_errors.APIUnprocessableEntityError, 422, message)


def worker_context(registry: Any) -> contextvars.Context:
    """What kopf-outcomes' wrapper of Kopf's per-object worker gives each of that object's cycles
    (``_kopf.requeue.wrap_worker``): the operator's registry and the worker's record of its rechecks.
    The histories call ``process_resource_event`` directly, so they stand in for the worker here."""
    from kopf_outcomes._kopf import internals, requeue

    context = contextvars.copy_context()
    context.run(internals.operator_registry.set, registry)
    context.run(requeue._runs.set, {})
    return context
