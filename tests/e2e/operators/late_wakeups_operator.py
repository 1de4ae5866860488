"""Parents that wait for their children (kopfexamples labelled with the parent's name), children
whose own handler takes 20 s over each change: issue 43, finding 1."""
from __future__ import annotations

import asyncio
from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()

PARENT = "example.com/parent"


@kopf_outcomes.depends_on_objects(kopf_outcomes.selected("kopf.dev", "v1", "kopfexamples",
                                                         labels={PARENT: "{metadata.name}"}))
@kopf.on.delete("kopf.dev", "v1", "kopfexamples", labels={"role": "parent"})
def delete_parent(**_: Any) -> object:
    if kopf_outcomes.recall().objects:
        return kopf_outcomes.Pending("waiting for the children to go")
    return None


@kopf.on.update("kopf.dev", "v1", "kopfexamples", labels={"role": "child"})
async def child_takes_its_time(**_: Any) -> object:
    """The child's own processing of its change lasts (a slow call, a wait of its own)."""
    await asyncio.sleep(20)
    return None
