"""The next version's handler code, with kopf-outcomes removed: stock Kopf only."""
from __future__ import annotations

from typing import Any

import kopf


@kopf.on.delete("kopf.dev", "v1", "kopfexamples", id="delete_fn")
def delete_fn(annotations: kopf.Annotations, **_: Any) -> None:
    if annotations.get("example.com/done") != "yes":
        raise kopf.TemporaryError("waiting for example.com/done", delay=2)
