"""A parent whose deletion waits for its Jobs (selected by a per-parent label) to succeed: for
``why``'s list of the objects a handler waits on (issue 44, finding 2)."""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()

PARENT = "example.com/parent"


@kopf_outcomes.depends_on_objects(kopf_outcomes.selected("batch/v1", "jobs", labels={PARENT: "{metadata.name}"},
                                                         fields=["status.succeeded"]))
@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
def delete_fn(**_: Any) -> object:
    unfinished = [job.name for job in kopf_outcomes.recall().objects if not job.fields[0]]
    if unfinished:
        return kopf_outcomes.Pending(f"{len(unfinished)} jobs unfinished")
    return None
