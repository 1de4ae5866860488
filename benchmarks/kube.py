"""
The benchmarks' API side: a client whose every request is retried (``benchmarks.retries``),
the CRD made sure to be served, bulk object operations, and scratch namespaces that are
cleaned up even on failure.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from kubernetes_asyncio import client, config

from benchmarks.common import GROUP, MERGE_PATCH, PLURAL, VERSION, say
from benchmarks.retries import RetryingApiClient

T = TypeVar("T")


async def api_client(kubeconfig: str | Path, *, pool: int = 64) -> RetryingApiClient:
    """A retrying client with a connection pool big enough for the bulk operations."""
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = pool
    return RetryingApiClient(configuration)


async def ensure_crd_served(api: client.ApiClient, crd: Mapping[str, Any], *, timeout: float = 120) -> float:
    """
    Create the CRD if it is missing, and wait until it is served: ``Established`` and a list of
    its objects answered. Right after creation, the API server may answer 404 or 429 ("storage
    is (re)initializing") for a while. Returns the seconds waited.
    """
    extensions = client.ApiextensionsV1Api(api)
    name = crd["metadata"]["name"]
    spec = crd["spec"]
    group, plural = spec["group"], spec["names"]["plural"]
    version = next(v["name"] for v in spec["versions"] if v.get("served"))
    try:
        await extensions.read_custom_resource_definition(name)
    except client.ApiException as e:
        if e.status != 404:
            raise
        say(f"creating the CRD {name}")
        try:
            await extensions.create_custom_resource_definition(dict(crd))  # type: ignore[arg-type]  # a dict is sent as is
        except client.ApiException as e:
            if e.status != 409:  # created meanwhile, or by a retried create
                raise
    began = time.monotonic()
    problem = "not established"
    while True:
        current = await extensions.read_custom_resource_definition(name)
        conditions = (current.status.conditions if current.status else None) or []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            try:
                await client.CustomObjectsApi(api).list_cluster_custom_object(group, version, plural, limit=1)
                return time.monotonic() - began
            except client.ApiException as e:
                if e.status != 404:  # served only once discovery catches up
                    raise
                problem = "established, but a list answers 404"
        if time.monotonic() - began > timeout:
            raise TimeoutError(f"the CRD {name} is not served after {timeout:.0f}s: {problem}")
        await asyncio.sleep(0.2)


async def bounded(items: Iterable[T], fn: Callable[[T], Awaitable[Any]], *, limit: int = 32) -> None:
    """Run ``fn`` over ``items`` with at most ``limit`` at a time; fail on the first error."""
    semaphore = asyncio.Semaphore(limit)

    async def one(item: T) -> None:
        async with semaphore:
            await fn(item)

    await asyncio.gather(*(one(item) for item in items))


async def create_objects(api: client.ApiClient, namespace: str, names: Sequence[str],
                         *, limit: int = 32, labels: Callable[[str], Mapping[str, str]] | None = None) -> None:
    """Create the named objects; ``labels`` gives each one's labels (e.g. its shard) by its name."""
    objects = client.CustomObjectsApi(api)

    async def create(name: str) -> None:
        metadata = {"name": name, **({"labels": dict(labels(name))} if labels is not None else {})}
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "KopfExample",
                "metadata": metadata, "spec": {"field": "value"}}
        try:
            await objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
        except client.ApiException as e:
            if e.status != 409:  # a retried create whose first try went through: the object is there
                raise

    await bounded(names, create, limit=limit)


async def delete_objects(api: client.ApiClient, namespace: str, names: Sequence[str],
                         *, limit: int = 32) -> None:
    """Delete every named object at (nearly) the same moment."""
    objects = client.CustomObjectsApi(api)

    async def delete(name: str) -> None:
        try:
            await objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except client.ApiException as e:
            if e.status != 404:  # a retried delete whose first try went through
                raise

    await bounded(names, delete, limit=limit)


async def purge_namespace(api: client.ApiClient, namespace: str) -> None:
    """Leave nothing behind: drop the finalizers of every object, delete them and the namespace."""
    objects = client.CustomObjectsApi(api)
    try:
        listing = await objects.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    except client.ApiException as e:
        if e.status == 404:
            return
        raise

    async def release(item: Mapping[str, Any]) -> None:
        try:
            await objects.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, item["metadata"]["name"],
                {"metadata": {"finalizers": None}},
                _content_type=MERGE_PATCH)  # type: ignore[call-arg]  # not in the client's stubs
        except client.ApiException as e:
            if e.status != 404:
                raise

    await bounded([item for item in listing["items"] if item["metadata"].get("finalizers")],
                  release, limit=32)
    with contextlib.suppress(client.ApiException):
        await objects.delete_collection_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    with contextlib.suppress(client.ApiException):
        await client.CoreV1Api(api).delete_namespace(namespace)


@contextlib.asynccontextmanager
async def scratch_namespace(api: client.ApiClient, prefix: str) -> AsyncIterator[str]:
    """A fresh namespace for one scenario; purged at the end, also on failure."""
    name = f"bench-{prefix}-{uuid.uuid4().hex[:6]}"
    try:
        await client.CoreV1Api(api).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    except client.ApiException as e:
        if e.status != 409:  # a retried create whose first try went through
            raise
    try:
        yield name
    finally:
        try:
            await asyncio.shield(purge_namespace(api, name))
        except Exception as e:  # never hide the scenario's own error behind a cleanup error
            say(f"cleanup of namespace {name} failed: {type(e).__name__}: {e}")
