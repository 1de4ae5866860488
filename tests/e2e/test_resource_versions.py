"""What ``_kopf/own_writes.py`` relies on, on the real API server: the resourceVersion a PATCH
returns is a comparable integer (KEP-5504), and an object's views before it are lower, after it
higher; the status subresource's writes are on the same line."""
from __future__ import annotations

from kopf_outcomes._kopf.own_writes import version_of
from tests.e2e.conftest import create_example, get_example

MERGE = "application/merge-patch+json"


async def test_a_patchs_resource_version_orders_the_objects_views(objects, namespace):
    created = await create_example(objects, namespace, "rv", {"a": 1})
    versions = [version_of(created["metadata"]["resourceVersion"])]
    for patch in ({"metadata": {"annotations": {"example.com/note": "1"}}}, {"spec": {"a": 2}}):
        written = await objects.patch_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", "rv",
                                                               patch, _content_type=MERGE)
        versions.append(version_of(written["metadata"]["resourceVersion"]))
    written = await objects.patch_namespaced_custom_object_status("kopf.dev", "v1", namespace, "kopfexamples", "rv",
                                                                  {"status": {"x": 1}}, _content_type=MERGE)
    versions.append(version_of(written["metadata"]["resourceVersion"]))
    now = await get_example(objects, namespace, "rv")
    assert now is not None
    versions.append(version_of(now["metadata"]["resourceVersion"]))
    assert None not in versions, versions
    assert versions[:-1] == sorted(set(versions[:-1])) and versions[-1] == versions[-2], versions
