"""
What both cleanup-job operators share (the ``jobs`` scenario): a parent is deleted through a
cleanup Job found by the label ``example.com/cluster=<parent's name>``; the handler writes
``status.phase`` and a timestamp with its own API client (not through Kopf's patch) whenever
the phase changes, as the real operators it is modelled on do.
"""
from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

from kubernetes_asyncio import client, config

LABEL = "example.com/cluster"
USER_AGENT = "bench-handler"  # the handler's own writes, told apart from Kopf's in the audit log
_api: list[client.ApiClient] = []


def phase_of(jobs: Iterable[tuple[Any, Any]]) -> str:
    """The parent's phase from its cleanup Jobs' (succeeded, failed) counts."""
    found = list(jobs)
    if not found:
        return "Deleting: no cleanup job yet"
    if all(succeeded for succeeded, _ in found):
        return "Deleted"
    if any(failed for _, failed in found):
        return "Deleting: the cleanup job failed, retrying"
    return "Deleting: the cleanup job runs"


async def own_api() -> client.ApiClient:
    """The handler's own API client (made once)."""
    if not _api:
        configuration = client.Configuration()
        await config.load_kube_config(client_configuration=configuration)
        api = client.ApiClient(configuration)
        api.user_agent = USER_AGENT
        _api.append(api)
    return _api[0]


async def write_phase(namespace: str, name: str, status: Any, phase: str) -> None:
    """Write the phase and when it changed, if it changed: one PATCH of the status subresource."""
    if (status or {}).get("phase") == phase:
        return
    now = datetime.datetime.now(datetime.timezone.utc).isoformat()
    await client.CustomObjectsApi(await own_api()).patch_namespaced_custom_object_status(
        "kopf.dev", "v1", namespace, "kopfexamples", name, {"status": {"phase": phase, "phaseChanged": now}},
        _content_type="application/merge-patch+json")
