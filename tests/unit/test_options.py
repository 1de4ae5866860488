"""Handler options: attached by a decorator in any order, merged field by field, validated."""

from __future__ import annotations

import dataclasses
from typing import Any

import kopf
import pytest

from kopf_outcomes import HandlerOptions, handler_options
from kopf_outcomes.options import attached_options
from tests.unit.kopf_objects import handlers_of


def test_options_stacked_above_kopfs_decorator() -> None:
    registry = kopf.OperatorRegistry()

    @handler_options(explicit_completion=True, depends_on=["status.deletion"])
    @kopf.on.delete("kopfexamples", registry=registry)
    def fn(**_: Any) -> None: ...

    [registered] = handlers_of(registry)
    assert attached_options(registered.fn) == HandlerOptions(
        explicit_completion=True, depends_on=("status.deletion",)
    )
    assert attached_options(fn) is attached_options(registered.fn)


def test_options_stacked_below_kopfs_decorator() -> None:
    registry = kopf.OperatorRegistry()

    @kopf.on.delete("kopfexamples", registry=registry)
    @handler_options(remember=True, fatal_on_delete="retain")
    def fn(**_: Any) -> None: ...

    [registered] = handlers_of(registry)
    assert attached_options(registered.fn) == HandlerOptions(remember=True, fatal_on_delete="retain")


def test_decorator_returns_the_same_function() -> None:
    def fn() -> int:
        return 42

    decorated = handler_options(remember=True)(fn)
    assert decorated is fn
    assert decorated() == 42


def test_options_of_undecorated_and_foreign_values() -> None:
    def plain() -> None: ...

    def impostor() -> None: ...

    impostor.__kopf_outcomes_options__ = {"remember": True}  # type: ignore[attr-defined]

    assert attached_options(plain) is None
    assert attached_options(impostor) is None
    assert attached_options(None) is None
    assert attached_options(42) is None


def test_unset_decorator_gives_all_none() -> None:
    @handler_options()
    def fn() -> None: ...

    assert attached_options(fn) == HandlerOptions()
    assert all(getattr(attached_options(fn), f.name) is None for f in dataclasses.fields(HandlerOptions))


def test_depends_on_becomes_a_tuple_from_any_iterable() -> None:
    @handler_options(depends_on=(path for path in ["spec.size", "status.x"]))
    def fn() -> None: ...

    options = attached_options(fn)
    assert options is not None
    assert options.depends_on == ("spec.size", "status.x")


def test_depends_on_as_a_plain_string_is_rejected() -> None:
    with pytest.raises(TypeError, match="depends_on must be a list of field paths, not a single string"):
        handler_options(depends_on="spec.size")


@pytest.mark.parametrize("value", ["keep", "Retain", True])
def test_bad_fatal_on_delete_is_rejected(value: Any) -> None:
    with pytest.raises(ValueError) as info:
        handler_options(fatal_on_delete=value)
    assert str(info.value) == f"fatal_on_delete must be 'release' or 'retain', got {value!r}"


def test_options_are_frozen() -> None:
    options = HandlerOptions(remember=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.remember = False  # type: ignore[misc]


# --- merging -----------------------------------------------------------------------------------


def test_merged_takes_unset_fields_from_the_fallback() -> None:
    own = HandlerOptions(explicit_completion=True)
    fallback = HandlerOptions(
        explicit_completion=False, depends_on=("spec",), remember=True, fatal_on_delete="retain"
    )
    assert own.merged(fallback) == HandlerOptions(
        explicit_completion=True, depends_on=("spec",), remember=True, fatal_on_delete="retain"
    )


@pytest.mark.parametrize(
    ("field", "own", "other"),
    [
        ("explicit_completion", False, True),
        ("remember", False, True),
        ("depends_on", (), ("spec",)),
        ("fatal_on_delete", "release", "retain"),
    ],
)
def test_merged_keeps_falsy_but_set_values(field: str, own: Any, other: Any) -> None:
    """Only None means "not set": False, () and "release" are decisions of their own."""
    merged = HandlerOptions(**{field: own}).merged(HandlerOptions(**{field: other}))
    assert getattr(merged, field) == own


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(HandlerOptions)])
def test_merged_field_by_field(field: str) -> None:
    values: dict[str, Any] = {
        "explicit_completion": True,
        "depends_on": ("spec.size",),
        "remember": True,
        "fatal_on_delete": "retain",
        "ignore": ("status.phase",),
    }
    with_field = HandlerOptions(**{field: values[field]})
    assert HandlerOptions().merged(with_field) == with_field
    assert with_field.merged(HandlerOptions()) == with_field
    others = HandlerOptions(**{k: v for k, v in values.items() if k != field})
    assert with_field.merged(others) == HandlerOptions(**values)


def test_merged_leaves_both_sides_unchanged() -> None:
    own, fallback = HandlerOptions(remember=True), HandlerOptions(explicit_completion=True)
    own.merged(fallback)
    assert own == HandlerOptions(remember=True)
    assert fallback == HandlerOptions(explicit_completion=True)
