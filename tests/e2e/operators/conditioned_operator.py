"""Handlers of a CRD with the standard condition schema: a very long reason, a very long id."""
from __future__ import annotations

from typing import Any

import kopf

import kopf_outcomes

kopf_outcomes.install()


@kopf.on.create("kopf.dev", "v1", "conditionedexamples")
def create_fn(spec: kopf.Spec, **_: Any) -> object:
    raise kopf_outcomes.Retry("x" * int(spec.get("reasonLength", 10)), delay=300)


@kopf.on.create("kopf.dev", "v1", "conditionedexamples", id="a_handler_whose_id_is_longer_than_a_condition_type_may_be")
def long_fn(**_: Any) -> object:
    return kopf_outcomes.Success()
