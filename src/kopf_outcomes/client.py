"""
The external system's side: signal a pending handler by changing what it depends on.

A callback service (aiohttp, Flask, ...) that learns "the external work is done" patches the
object; the parked handler's state changes and Kopf runs it again at once. One merge-patch,
through the status subresource or the main resource, with kubernetes-asyncio.

kubernetes-asyncio is the ``client`` extra (``pip install kopf-outcomes[client]``), not a runtime
dependency: its mere presence changes how Kopf logs in (``login_via_async_client``). It is
imported when ``signal`` is called, not when this module is.
"""
from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubernetes_asyncio import client

# Custom objects take JSON-patch first by default; a dict body needs a merge-patch said aloud.
# (The client accepts ``_content_type``; its type stubs do not list it, hence the ignores.)
MERGE_PATCH = "application/merge-patch+json"


async def signal(
    api: client.ApiClient,
    *,
    group: str,
    version: str,
    plural: str,
    namespace: str,
    name: str,
    annotations: Mapping[str, str | None] | None = None,
    status: Mapping[str, Any] | None = None,
) -> None:
    """
    Wake the pending handlers of one object: set annotations, or status fields, or both.

    Status goes through the status subresource (where the CRD enables it), as a controller
    outside the operator is expected to write it; annotations through the main resource.
    """
    if not annotations and not status:
        raise ValueError("signal() needs annotations or status to change, got neither")
    objects = _client_module().CustomObjectsApi(api)
    if annotations:
        await objects.patch_namespaced_custom_object(
            group, version, namespace, plural, name,
            {"metadata": {"annotations": dict(annotations)}},
            _content_type=MERGE_PATCH,
        )
    if status:
        await objects.patch_namespaced_custom_object_status(
            group, version, namespace, plural, name,
            {"status": dict(status)},
            _content_type=MERGE_PATCH,
        )


def _client_module() -> ModuleType:
    try:
        return importlib.import_module("kubernetes_asyncio.client")
    except ImportError as e:
        raise ImportError(
            "kopf_outcomes.client.signal() needs kubernetes-asyncio, which is not installed:"
            " pip install 'kopf-outcomes[client]'", name=e.name) from None
