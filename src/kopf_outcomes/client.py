"""
The external system's side: signal a pending handler by changing what it depends on.

A callback service (aiohttp, Flask, ...) that learns "the external work is done" patches the
object; the parked handler's state changes and Kopf runs it again at once. One merge-patch,
through the status subresource or the main resource, with kubernetes-asyncio.

From the shell, ``kopf-outcomes signal KIND/NAME`` sends the same patches (with the standard
library: it needs no extra).
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
    main, subresource = patches(annotations, status)
    objects = _client_module().CustomObjectsApi(api)
    if main is not None:
        await objects.patch_namespaced_custom_object(
            group, version, namespace, plural, name, main, _content_type=MERGE_PATCH)
    if subresource is not None:
        await objects.patch_namespaced_custom_object_status(
            group, version, namespace, plural, name, subresource, _content_type=MERGE_PATCH)


def patches(annotations: Mapping[str, str | None] | None,
            status: Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The merge-patches of a signal: of the main resource (annotations) and of the status
    subresource (status); ``None`` for one with nothing to change (a key's ``None`` removes it).
    The rule of ``signal()`` and of ``kopf-outcomes signal``, stated once."""
    if not annotations and not status:
        raise ValueError("a signal needs annotations or status to change, got neither")
    return ({"metadata": {"annotations": dict(annotations)}} if annotations else None,
            {"status": dict(status)} if status else None)


def _client_module() -> ModuleType:
    try:
        return importlib.import_module("kubernetes_asyncio.client")
    except ImportError as e:
        raise ImportError(
            "kopf_outcomes.client.signal() needs kubernetes-asyncio, which is not installed:"
            " pip install 'kopf-outcomes[client]'", name=e.name) from None
