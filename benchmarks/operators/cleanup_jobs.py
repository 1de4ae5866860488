"""
What both cleanup-job operators share (the ``jobs`` scenario): a parent is deleted through a
cleanup Job found by the label ``example.com/cluster=<parent's name>``; the handler writes
``status.phase`` and a timestamp with its own API client (not through Kopf's patch) whenever
the phase changes, as the real operators it is modelled on do.
"""
from __future__ import annotations

import datetime
import os
from collections.abc import Iterable
from typing import Any

from kubernetes_asyncio import client, config

LABEL = "example.com/cluster"
USER_AGENT = "bench-handler"  # the handler's own writes, told apart from Kopf's in the audit log
# The port's shape (issue 43, finding 6): the handler creates its own cleanup Job, and writes its
# status on every run, changed or not.
CREATES_JOB = bool(os.environ.get("BENCH_CREATES_JOB"))
CREATED = "Deleting: the cleanup job was created"
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
    if (status or {}).get("phase") == phase and not CREATES_JOB:
        return
    now = datetime.datetime.now(datetime.timezone.utc).isoformat()
    await client.CustomObjectsApi(await own_api()).patch_namespaced_custom_object_status(
        "kopf.dev", "v1", namespace, "kopfexamples", name, {"status": {"phase": phase, "phaseChanged": now}},
        _content_type="application/merge-patch+json")


async def create_job(namespace: str, name: str) -> None:
    """The parent's cleanup Job, created by its handler (one that exists already is left as it is)."""
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": f"{name}-cleanup", "labels": {LABEL: name}},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "cleanup", "image": "busybox", "command": ["true"]}]}}}}
    try:
        await client.BatchV1Api(await own_api()).create_namespaced_job(namespace, job)
    except client.ApiException as e:
        if e.status != 409:
            raise
