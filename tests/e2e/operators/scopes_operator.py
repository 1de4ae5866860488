"""Which objects a handler's sources see, and which a shard refuses (issue 41 findings 2 and 4,
issue 43 finding 3). ``SCOPES_MODE=reference``: a deletion that waits while the Secret its
``spec.lockRef`` names exists (``"namespace/name"``); ``SCOPES_MODE=jobs``: a deletion that waits
for its cleanup Jobs, found both by a label with its name and by their ownerReferences, until each
has succeeded; ``SCOPES_MODE=shard``: shard ``a`` of KopfExamples by label, and a plain deletion
handler on ConfigMaps (not sharded)."""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes

MODE = os.environ.get("SCOPES_MODE", "")
SHARD_LABEL = "kopf-outcomes.example.com/shard"
PARENT_LABEL = "kopf-outcomes.example.com/parent"

kopf_outcomes.install(plugins=[])

if MODE == "reference":
    @kopf_outcomes.depends_on_objects(kopf_outcomes.referenced("v1", "secrets", field="spec.lockRef"))
    @kopf.on.delete("kopf.dev", "v1", "kopfexamples")
    def delete_fn(**_: Any) -> object:
        if kopf_outcomes.recall().objects:
            return kopf_outcomes.Pending("the lock remains")
        return None

if MODE == "jobs":
    @kopf_outcomes.depends_on_objects(
        kopf_outcomes.selected("batch/v1", "jobs", labels={PARENT_LABEL: "{metadata.name}"},
                               fields=["status.succeeded"]),
        kopf_outcomes.owned("batch/v1", "jobs"))
    @kopf.on.delete("kopf.dev", "v1", "kopfexamples")
    def delete_fn(logger: kopf.Logger, **_: Any) -> object:
        jobs = kopf_outcomes.recall().objects
        logger.info(f"Jobs and their fields: {sorted((job.name, job.fields) for job in jobs)}")
        if any(job.fields[0] != 1 for job in jobs):
            return kopf_outcomes.Pending("the cleanup Jobs run")
        return None

if MODE == "shard":
    @kopf.on.delete("kopf.dev", "v1", "kopfexamples", labels=kopf_outcomes.shard(SHARD_LABEL, "a"))
    def delete_fn(**_: Any) -> object:
        return None

    @kopf.on.delete("v1", "configmaps")
    def delete_configmap(**_: Any) -> object:
        return None
