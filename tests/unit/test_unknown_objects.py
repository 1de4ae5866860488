"""
``recall().objects`` where the objects are unknown (issue 41): every use that could read them as
none raises ``ObjectsUnknownError``, not only truth and length: ``recall().objects == ()`` was
True, ``objects + ()`` and ``.count()`` answered as for no objects. Read in a real handler run, of
a kind whose objects cannot be known (a timer).
"""
from __future__ import annotations

import logging
import operator
from collections.abc import Callable
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes.manager import PluginManager
from tests.unit.kopf_objects import cause_of, handler_of, run_handlers
from tests.unit.test_objects_safety import CHILD, index_of, installed  # noqa: F401  # installed: a fixture
from tests.unit.test_patched_execution import BODY

USES: dict[str, Callable[[Any], object]] = {
    "truth": bool,
    "len": len,
    "== ()": lambda objects: objects == (),
    "() ==": lambda objects: () == objects,
    "!= ()": lambda objects: objects != (),
    "< ()": lambda objects: objects < (),
    "+ ()": lambda objects: objects + (),
    "() +": lambda objects: () + objects,
    "* 2": lambda objects: objects * 2,
    "count": lambda objects: objects.count(None),
    "index": lambda objects: objects.index(None),
    "in": lambda objects: None in objects,
    "iteration": list,
    "unpacking": lambda objects: [*objects],
    "reversed": reversed,
    "indexing": operator.itemgetter(0),
    "slicing": operator.itemgetter(slice(None)),
    "tuple()": tuple,
}


@pytest.mark.parametrize("use", USES)
async def test_unknown_objects_raise_on_every_use_that_could_read_them_as_none(
        use: str, installed: PluginManager, logger: logging.Logger) -> None:  # noqa: F811
    source = kopf_outcomes.owned("v1", "configmaps")
    seen: list[object] = []

    @kopf_outcomes.depends_on_objects(source, registry=kopf.OperatorRegistry())
    async def fn(**_: Any) -> None:
        objects = kopf_outcomes.recall().objects
        try:
            seen.append(USES[use](objects))
        except kopf_outcomes.ObjectsUnknownError as e:
            seen.append(e)
        seen.append(repr(objects))  # a log line may show it: it says so, and does not raise

    h = handler_of("timer", fn)
    cause = cause_of("timer", BODY, logger)
    cause.indices = index_of(source, CHILD)
    await run_handlers([h], cause)
    error, shown = seen
    assert isinstance(error, kopf_outcomes.ObjectsUnknownError), f"{use} answered {error!r}"
    assert "only a change handler" in str(error)
    assert isinstance(shown, str) and shown.startswith("<unknown objects: ")
