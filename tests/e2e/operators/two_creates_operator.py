"""Two create handlers of a CRD with the standard condition schema: the first succeeds at once,
the second waits until the label ``second`` is "done" (a label: the generation stays).
``CONDITIONS_FINALIZER`` sets the operator's finalizer (a long one gives its condition types the
longest prefix); a third handler has an id longer than a condition type's name may be."""
from __future__ import annotations

import os
from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    if os.environ.get("CONDITIONS_FINALIZER"):
        settings.persistence.finalizer = os.environ["CONDITIONS_FINALIZER"]


@kopf.on.create("kopf.dev", "v1", "conditionedexamples")
def first_fn(**_: Any) -> object:
    return kopf_outcomes.Success()


@kopf.on.create("kopf.dev", "v1", "conditionedexamples")
def second_fn(labels: kopf.Labels, **_: Any) -> object:
    return kopf_outcomes.Success() if labels.get("second") == "done" else kopf_outcomes.Pending("not done yet")


@kopf.on.create("kopf.dev", "v1", "conditionedexamples",
                id="a_handler_whose_id_is_much_longer_than_any_condition_type_may_ever_be")
def long_fn(**_: Any) -> object:
    return kopf_outcomes.Success()
