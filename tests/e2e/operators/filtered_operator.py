"""One operator (no shards) whose deletion handler serves the objects labelled ``served=yes`` and
waits (parked) for the callback's ``status.deletion.state``."""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", labels={"served": "yes"})
def delete_fn(status: kopf.Status, **_: Any) -> kopf_outcomes.Outcome:
    if status.get("deletion", {}).get("state") == "done":
        return kopf_outcomes.Success()
    return kopf_outcomes.Pending("waiting for the external system to call back")
