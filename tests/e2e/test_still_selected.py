"""
A shard's recheck of an object asks the real API server whether the object is still in the
shard's watch (Kopf 1.45's server-side selection): a watch that restarted from a new listing
("410 Gone") is not told of an object that left meanwhile, so the last state it has of the
object is no longer its own to act on.
"""
from __future__ import annotations

import kopf
import pytest
from kopf._cogs.clients import auth
from kopf._cogs.structs import credentials, references

from kopf_outcomes._kopf import selection
from tests.e2e.conftest import get_example
from tests.e2e.test_memory import patch

pytestmark = pytest.mark.skipif(not hasattr(kopf.OperatorSettings().watching, "label_selectors"),
                                reason="Kopf < 1.45 selects nothing on the server: every object is listed again")
RESOURCE = references.Resource("kopf.dev", "v1", "kopfexamples", namespaced=True)
LABEL = "kopf-outcomes.example.com/shard"


async def test_a_recheck_asks_the_api_server_whether_its_object_is_still_in_the_shard(
        cluster, objects, namespace) -> None:
    vault = credentials.Vault()
    await vault.populate({"admin": credentials.ConnectionInfo(
        server=cluster.server, ca_path=str(cluster.ca_path), token=cluster.admin_token)})
    auth.vault_var.set(vault)  # as Kopf's login activity sets it for the operator
    settings = kopf.OperatorSettings()
    settings.watching.label_selectors["kopf.dev", "kopfexamples"] = f"{LABEL}=a"
    selected = selection.server_selection(settings, RESOURCE)
    assert selected == (f"{LABEL}=a", "", "")

    for name in ("kept", "other"):  # another object of the shard does not answer for it
        await objects.create_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", {
            "apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": name, "labels": {LABEL: "a"}}})
    last = await get_example(objects, namespace, "kept")  # the shard's last state of it: labelled "a"
    assert await selection.still_selected(settings, RESOURCE, selected, last) is True

    await patch(objects, namespace, "kept", {"metadata": {"labels": {LABEL: "b"}}})  # moved to shard b
    assert await selection.still_selected(settings, RESOURCE, selected, last) is False
    await patch(objects, namespace, "kept", {"metadata": {"labels": {LABEL: "a"}}})  # and back
    assert await selection.still_selected(settings, RESOURCE, selected, last) is True
    await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", "kept")
    assert await selection.still_selected(settings, RESOURCE, selected, last) is False

    refused = selection.Selection("=not a selector", "", "")  # the API server cannot answer (400): the recheck runs
    assert await selection.still_selected(settings, RESOURCE, refused, last) is True
