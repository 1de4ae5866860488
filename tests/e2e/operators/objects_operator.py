"""Handlers that wait on other objects: a deletion handler parked until the parent's owned
ConfigMaps are gone; a creation handler parked until the Secret named by spec.secretName exists."""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()


@kopf_outcomes.depends_on_objects(kopf_outcomes.owned("v1", "configmaps"))
@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
def delete_fn(**_: Any) -> object:
    children = kopf_outcomes.recall().objects
    if children:
        return kopf_outcomes.Pending("waiting for the children to go")  # the same conclusion: no write
    return None


@kopf_outcomes.depends_on_objects(kopf_outcomes.referenced("v1", "secrets", field="spec.secretName"))
@kopf.on.create("kopf.dev", "v1", "kopfexamples")
def create_fn(spec: Any, **_: Any) -> object:
    if "secretName" not in spec:
        return None
    if not kopf_outcomes.recall().objects:
        return kopf_outcomes.Pending(f"waiting for the secret {spec['secretName']!r}")
    return "found"
