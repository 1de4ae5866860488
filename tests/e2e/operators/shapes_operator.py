"""Real operators' shapes (issue 29): a deletion waits for the ConfigMaps labelled with the
parent's own name (no ownerReferences); a creation waits for the Secret that spec.secretRef
names, in another namespace."""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()


@kopf_outcomes.depends_on_objects(
    kopf_outcomes.selected("v1", "configmaps", labels={"example.com/cluster": "{metadata.name}"}))
@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
def delete_fn(**_: Any) -> object:
    if kopf_outcomes.recall().objects:
        return kopf_outcomes.Pending("waiting for the cluster's configmaps to go")
    return None


@kopf_outcomes.depends_on_objects(kopf_outcomes.referenced("v1", "secrets", field="spec.secretRef"))
@kopf.on.create("kopf.dev", "v1", "kopfexamples")
def create_fn(spec: Any, **_: Any) -> object:
    if "secretRef" in spec and not kopf_outcomes.recall().objects:
        return kopf_outcomes.Pending("waiting for the secret")
    return None
