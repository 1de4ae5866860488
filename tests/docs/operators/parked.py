"""With kopf-outcomes: the delete handler parks (Pending without recheck) until told it is done."""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", id="delete_fn")
def delete_fn(annotations: kopf.Annotations, **_: Any) -> kopf_outcomes.Outcome:
    if annotations.get("example.com/done") == "yes":
        return kopf_outcomes.Success()
    return kopf_outcomes.Pending("waiting for example.com/done")
