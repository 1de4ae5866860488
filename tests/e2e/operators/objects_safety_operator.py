"""A deletion that waits for the parent's owned ConfigMaps, under what once released it early
(issue 29): ``SAFETY_MODE=plugin`` — a plugin written for the parent's resource, failing on any
object without a spec; ``SAFETY_MODE=subhandler`` — the objects declared on a sub-handler (held,
with one ERROR that says to declare them on the parent, as the default mode does); ``SAFETY_MODE=selected``
— the operator watches only ConfigMaps with a label the children lack (Kopf 1.45's server-side
selectors: held, with one ERROR that says so). A policy comes
from ``KOPF_OUTCOMES_POLICY`` (``explicit_completion = true``: the handler returns True when done)."""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes

MODE = os.environ.get("SAFETY_MODE", "")
WATCHED = {"kopf-outcomes.example.com/watched": "yes"}  # SAFETY_MODE=selected*: the only ConfigMaps watched
# "selected-implied": the objects waited for carry the very labels the API server selects: all seen.
CHILDREN = kopf_outcomes.selected("v1", "configmaps", labels=WATCHED) if MODE == "selected-implied" else \
    kopf_outcomes.owned("v1", "configmaps")


class ReadsTheSpec:
    """Written for KopfExamples: every object it meets has a spec (a ConfigMap has none)."""

    @kopf_outcomes.hookimpl
    def kopf_outcomes_adjust_outcome(self, run: kopf_outcomes.HandlerRun, decision: kopf_outcomes.Decision) -> None:
        if run.body is not None:
            run.body["spec"].get("size")


kopf_outcomes.install(plugins=[ReadsTheSpec()] if MODE == "plugin" else [])


@kopf.on.startup()
def quick_to_give_up(settings: kopf.OperatorSettings, **_: Any) -> bool:
    settings.networking.error_backoffs = [0.2, 0.2]  # a forbidden listing: Kopf gives up in a second
    if MODE.startswith("selected"):  # the API server sends only the ConfigMaps labelled so
        settings.watching.label_selectors["configmaps"] = ",".join(f"{k}={v}" for k, v in WATCHED.items())
    return True  # done: also under explicit_completion


def wait_for_children(**_: Any) -> object:
    if kopf_outcomes.recall().objects:
        return kopf_outcomes.Pending("waiting for the children to go")
    return True  # done: also under explicit_completion


if MODE == "subhandler":  # the wrong place: a sub-handler's objects are unknown
    waits = kopf_outcomes.depends_on_objects(CHILDREN)(wait_for_children)

    @kopf.on.delete("kopf.dev", "v1", "kopfexamples")
    async def delete_fn(**_: Any) -> object:
        await kopf.execute(fns={"children": waits})  # type: ignore[dict-item]  # Kopf types fns by a protocol
        return True
else:
    kopf_outcomes.depends_on_objects(CHILDREN)(kopf.on.delete("kopf.dev", "v1", "kopfexamples", id="delete_fn")(
        wait_for_children))
