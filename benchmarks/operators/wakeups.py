"""
kopf-outcomes, the ``wakeups`` scenario: a parent's deletion waits for its children (ConfigMaps
labelled ``example.com/parent=<parent's name>``) until each one's ``data.state`` is ``done``;
children labelled ``example.com/waits=yes`` have a handler of their own that waits too.
"""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes
from benchmarks.operators import runs

kopf_outcomes.install()

PARENT, WAITS = "example.com/parent", "example.com/waits"
CHILDREN = kopf_outcomes.selected("v1", "configmaps", labels={PARENT: "{metadata.name}"}, fields=["data.state"])


@kopf_outcomes.depends_on_objects(CHILDREN)
@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
def delete_fn(name: str, **_: Any) -> kopf_outcomes.Outcome:
    runs.record(name)
    if any(child.fields[0] != "done" for child in kopf_outcomes.recall().objects):
        return kopf_outcomes.Pending("children run")
    return kopf_outcomes.Success()


@kopf.on.create("v1", "configmaps", labels={WAITS: "yes"})
def child_waits(**_: Any) -> kopf_outcomes.Outcome:
    return kopf_outcomes.Pending("the child waits for something of its own", recheck=60)
