"""The four outcomes: validation with clear messages, value semantics, return-or-raise."""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest

from kopf_outcomes import Fatal, Outcome, Pending, Retry, Success
from kopf_outcomes.engine import PluginFailure

# --- reasons -----------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [Pending, Retry, Fatal])
@pytest.mark.parametrize("reason", [None, 42, b"bytes", ["a"]])
def test_reason_must_be_a_string(cls: type[Outcome], reason: object) -> None:
    with pytest.raises(TypeError) as info:
        cls(reason)
    assert str(info.value) == f"{cls.__name__}(reason) must be a string, got {reason!r}"


# --- delays and rechecks -----------------------------------------------------------------------


@pytest.mark.parametrize("value", [-1, -0.001, -math.inf])
def test_negative_delay_is_rejected(value: float) -> None:
    with pytest.raises(ValueError) as info:
        Retry("x", delay=value)
    assert str(info.value) == (
        f"Retry(delay=...) must be a number of seconds from 0 to 31622400 (a year), got {value:g}")


def test_nan_delay_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"Retry\(delay=\.\.\.\) must be a number of seconds from 0 to "
                                         r"31622400 \(a year\), got nan"):
        Retry("x", delay=math.nan)


@pytest.mark.parametrize("value", [True, False, "5", None, [1]])
def test_non_number_delay_is_a_type_error(value: object) -> None:
    with pytest.raises(TypeError) as info:
        Retry("x", delay=value)  # type: ignore[arg-type]
    assert str(info.value) == f"Retry(delay=...) must be a number of seconds, got {value!r}"


@pytest.mark.parametrize("value", [-1, math.nan])
def test_negative_or_nan_recheck_is_rejected(value: float) -> None:
    with pytest.raises(ValueError, match=r"^Pending\(recheck=\.\.\.\) must be a number of seconds from 0 to"):
        Pending("x", recheck=value)


@pytest.mark.parametrize("value", [True, "10"])
def test_non_number_recheck_is_a_type_error(value: object) -> None:
    with pytest.raises(TypeError, match=r"^Pending\(recheck=\.\.\.\) must be a number of seconds"):
        Pending("x", recheck=value)  # type: ignore[arg-type]


def test_delays_and_rechecks_are_stored_as_floats() -> None:
    assert Retry("x", delay=3).delay == 3.0
    assert isinstance(Retry("x", delay=3).delay, float)
    assert Retry("x", delay=0).delay == 0.0
    assert Retry("x").delay == 60.0
    assert Pending("x", recheck=5).recheck == 5.0
    assert isinstance(Pending("x", recheck=5).recheck, float)
    assert Pending("x").recheck is None


# --- levels -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("warning", logging.WARNING),
        ("WARNING", logging.WARNING),
        ("Info", logging.INFO),
        ("debug", logging.DEBUG),
        ("ERROR", logging.ERROR),
        (logging.INFO, logging.INFO),
        (25, 25),
    ],
)
@pytest.mark.parametrize("cls", [Retry, Fatal])
def test_levels_by_name_or_number(cls: type[Retry] | type[Fatal], given: Any, expected: int) -> None:
    assert cls("x", level=given).level == expected


def test_default_levels() -> None:
    assert Retry("x").level == logging.WARNING
    assert Fatal("x").level == logging.ERROR


@pytest.mark.parametrize("cls", [Retry, Fatal])
@pytest.mark.parametrize("name", ["loud", "", "LEVEL 5", "warn ing"])
def test_unknown_level_names_are_rejected(cls: type[Retry] | type[Fatal], name: str) -> None:
    with pytest.raises(ValueError) as info:
        cls("x", level=name)
    assert str(info.value) == (
        f"{cls.__name__}(level=...) must be a logging level name such as DEBUG, INFO, WARNING, ERROR, "
        f"CRITICAL, got {name!r}")


@pytest.mark.parametrize("cls", [Retry, Fatal])
@pytest.mark.parametrize("level", [True, 2.5, None, [30]])
def test_non_level_values_are_type_errors(cls: type[Retry] | type[Fatal], level: object) -> None:
    with pytest.raises(TypeError) as info:
        cls("x", level=level)  # type: ignore[arg-type]
    assert str(info.value) == (
        f"{cls.__name__}(level=...) must be a logging level (a number, or a name such as WARNING), got {level!r}"
    )


# --- on_delete ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, "release", "retain"])
def test_fatal_on_delete_accepts_the_documented_values(value: Any) -> None:
    assert Fatal("x", on_delete=value).on_delete == value


@pytest.mark.parametrize("value", ["keep", "RETAIN", True, 1])
def test_fatal_on_delete_rejects_anything_else(value: Any) -> None:
    with pytest.raises(ValueError) as info:
        Fatal("x", on_delete=value)
    assert str(info.value) == (
        f"Fatal(on_delete=...) must be 'release' or 'retain', got {value!r}"
    )


# --- equality, hashing, repr, str --------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (Success(), Success(None)),
        (Success({"a": 1}), Success({"a": 1})),
        (Pending("x"), Pending("x", recheck=None)),
        (Pending("x", recheck=5), Pending("x", recheck=5.0)),
        (Retry("x"), Retry("x", delay=60, level="warning")),
        (Retry("x", level=logging.ERROR), Retry("x", level="ERROR")),
        (Fatal("x"), Fatal("x", level="error", on_delete=None)),
    ],
)
def test_equal_outcomes(a: Outcome, b: Outcome) -> None:
    assert a == b
    assert not (a != b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (Success(1), Success(2)),
        (Pending("x"), Pending("y")),
        (Pending("x"), Pending("x", recheck=1)),
        (Retry("x"), Retry("x", delay=1)),
        (Retry("x"), Retry("x", level=logging.ERROR)),
        (Fatal("x"), Fatal("x", on_delete="retain")),
        (Fatal("x"), Fatal("x", level=logging.WARNING)),
        (Pending("x"), Retry("x")),
        (Retry("x", level=logging.ERROR), Fatal("x")),
        # A subclass is another outcome, even with equal fields.
        (Retry("x", level=logging.ERROR), PluginFailure("x", level=logging.ERROR)),
        (Pending("x"), "x"),
        (Success(), None),
    ],
)
def test_unequal_outcomes(a: Outcome, b: object) -> None:
    assert a != b
    assert b != a


def test_equal_outcomes_hash_equally_and_work_as_keys() -> None:
    assert hash(Retry("x", level="warning")) == hash(Retry("x", delay=60.0, level=30))
    assert hash(Pending("x", recheck=5)) == hash(Pending("x", recheck=5.0))
    seen = {Pending("x"), Pending("x"), Retry("x"), Fatal("x"), Success()}
    assert len(seen) == 4
    assert {Pending("x"): 1}[Pending("x")] == 1


@pytest.mark.parametrize(
    ("outcome", "text"),
    [
        (Success(), "Success(None)"),
        (Success({"a": 1}), "Success({'a': 1})"),
        (Pending("waiting"), "Pending('waiting', None)"),
        (Pending("waiting", recheck=5), "Pending('waiting', 5.0)"),
        (Retry("flaky", delay=3, level="INFO"), "Retry('flaky', 3.0, 20)"),
        (Fatal("broken", on_delete="retain"), "Fatal('broken', 40, 'retain')"),
    ],
)
def test_repr(outcome: Outcome, text: str) -> None:
    assert repr(outcome) == text


def test_str_is_the_reason() -> None:
    assert str(Pending("waiting for the callback")) == "waiting for the callback"
    assert str(Retry("flaky")) == "flaky"
    assert str(Fatal("broken")) == "broken"
    assert str(Success("anything")) == "success"


# --- return or raise ---------------------------------------------------------------------------


def test_outcomes_are_exceptions_that_can_be_raised_from_deep_helpers() -> None:
    def helper() -> None:
        raise Pending("waiting", recheck=1)

    with pytest.raises(Outcome) as info:
        helper()
    assert info.value == Pending("waiting", recheck=1)
    assert isinstance(info.value, Exception)


@pytest.mark.parametrize(
    "outcome", [Success(1), Pending("p"), Retry("r"), Fatal("f")], ids=repr
)
def test_raised_and_returned_forms_are_the_same_value(outcome: Outcome) -> None:
    def returning() -> Outcome:
        return outcome

    def raising() -> None:
        raise outcome

    try:
        raising()
    except Outcome as e:
        raised: Outcome = e
    else:  # pragma: no cover - the test fails below
        raise AssertionError("not raised")
    assert raised == returning()
    assert raised is outcome


def test_exception_args_carry_the_reason() -> None:
    assert Pending("p").args == ("p",)
    assert Retry("r").args == ("r",)
    assert Fatal("f").args == ("f",)
    assert Success(1).args == ()
