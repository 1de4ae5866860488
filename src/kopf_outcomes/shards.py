"""
Shards by label: several Deployments of one operator, each serving the objects whose label has
its value. They share one Kopf identity (finalizer, progress, memory), so that an object that
changes shard while its deletion waits is continued where it moves, from the memory in the object.

Stock Kopf cannot share a finalizer between shards that filter by label: a shard removes it from
every object its handlers do not match ("no handlers requiring it"), the shard that matches adds it
back, without end (Kopf issue 664); and mid-deletion that removal releases the object while its
handler waits. A declared shard therefore never removes the finalizer of an object of its sharded
resource (one whose handlers filter by the label) that carries another value of the label, or
none: that object is another shard's (or waits for one). The operator's other resources are not
sharded: stock Kopf releases their objects.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["declared", "others", "shard"]

declared: tuple[str, str] | None = None  # (label, value) of this process's shard, if it is one
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")  # a label's name, and its value
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")  # a DNS subdomain


def shard(label: str, value: str) -> dict[str, str]:
    """
    Declare this process a shard: it serves the objects whose ``label`` is ``value``. Returns the
    ``labels=`` filter of its handlers (``@kopf.on.delete(..., labels=kopf_outcomes.shard(...))``).
    The finalizer of another shard's object (another value, or no label) of a resource whose
    handlers filter by this label is then never removed here.
    """
    global declared
    if not isinstance(label, str) or not label:
        raise ValueError(f"kopf_outcomes.shard(): the label must be a non-empty string, got {label!r}")
    if not isinstance(value, str) or not value:
        raise ValueError(f"kopf_outcomes.shard(): the value of the label {label!r} must be a non-empty string "
                         f"(this Deployment's shard, e.g. from an environment variable), got {value!r}")
    # Kubernetes' label syntax: else the API server refuses the selector, or nothing ever matches.
    prefix, _, name = label.rpartition("/")
    if not _NAME.fullmatch(name) or len(name) > 63 or (prefix and (len(prefix) > 253 or not _PREFIX.fullmatch(prefix))):
        raise ValueError(f"kopf_outcomes.shard(): {label!r} is not a Kubernetes label key ([prefix/]name: a name of "
                         f"up to 63 letters, digits, '-', '_', '.', beginning and ending with a letter or digit)")
    if not _NAME.fullmatch(value) or len(value) > 63:
        raise ValueError(f"kopf_outcomes.shard(): {value!r} is not a Kubernetes label value for {label!r} (up to 63 "
                         f"letters, digits, '-', '_', '.', beginning and ending with a letter or digit)")
    if declared is not None and declared != (label, value):
        raise ValueError(f"kopf_outcomes.shard(): this process is already the shard {declared[0]}={declared[1]}; "
                         f"one process serves one shard, not also {label}={value}")
    declared = (label, value)
    return {label: value}


def others(body: Mapping[str, Any]) -> bool:
    """Whether the object belongs to another shard (or to none) than this process's declared one."""
    if declared is None:
        return False
    label, value = declared
    labels = (body.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(label) != value)
