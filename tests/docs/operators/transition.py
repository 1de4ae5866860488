"""The next version's handler code (stock Kopf style), still with kopf_outcomes.install()."""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", id="delete_fn")
def delete_fn(annotations: kopf.Annotations, **_: Any) -> None:
    if annotations.get("example.com/done") != "yes":
        raise kopf.TemporaryError("waiting for example.com/done", delay=2)
