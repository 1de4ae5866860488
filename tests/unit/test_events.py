"""Outcome lines become Events with a reason per outcome (kopf_outcomes.events), once, at
Kopf's posting level; stock Kopf's records, and records below the level, are left to Kopf."""
from __future__ import annotations

import logging
from typing import Any

import kopf
import pytest

from kopf_outcomes import events

REF = {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "name": "x", "uid": "u", "namespace": "ns"}


def record(level: int, outcome: str | None, *, ref: Any = REF) -> logging.LogRecord:
    made = logging.LogRecord("kopf.objects", level, __file__, 1, "Handler 'delete_fn' is pending: w", None, None)
    settings = kopf.OperatorSettings()
    if hasattr(settings.posting, "loggers"):  # Kopf >= 1.45 posts log lines only when asked
        settings.posting.loggers = True
    extra = {"settings": settings, "k8s_skip": False, "k8s_ref": ref}
    if outcome is not None:
        extra["outcome"] = outcome
    made.__dict__.update(extra)
    return made


@pytest.fixture()
def posted(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(kopf, "event", lambda objs, **kwargs: calls.append({"body": dict(objs), **kwargs}))
    monkeypatch.setattr(events, "_series", None)
    return calls


@pytest.mark.parametrize("outcome, level, type_, reason", [
    ("pending", logging.INFO, "Normal", "Pending"),
    ("success", logging.INFO, "Normal", "Succeeded"),
    ("retry", logging.WARNING, "Warning", "Retrying"),
    ("retry", logging.ERROR, "Error", "Retrying"),
    ("retained", logging.ERROR, "Error", "FinalizerRetained"),
    ("fatal", logging.CRITICAL, "Fatal", "Failed"),
])
def test_an_outcome_line_is_posted_with_its_reason_and_not_again_by_kopf(
        posted: list[dict[str, Any]], outcome: str, level: int, type_: str, reason: str) -> None:
    line = record(level, outcome)
    assert events.OutcomeEvents().filter(line) is True  # still logged
    [event] = posted
    assert (event["type"], event["reason"], event["message"]) == (type_, reason, "Handler 'delete_fn' is pending: w")
    assert event["body"]["metadata"] == {"name": "x", "uid": "u", "namespace": "ns"}
    assert event["body"]["kind"] == "KopfExample"
    assert line.k8s_skip is True  # type: ignore[attr-defined]


def test_a_quiet_line_below_the_posting_level_posts_nothing(posted: list[dict[str, Any]]) -> None:
    line = record(logging.DEBUG, "pending")  # a Pending that holds: logged at DEBUG
    assert events.OutcomeEvents().filter(line) is True
    assert posted == [] and line.k8s_skip is False  # type: ignore[attr-defined]


def test_stock_kopfs_lines_are_left_to_kopf(posted: list[dict[str, Any]]) -> None:
    line = record(logging.ERROR, None)
    assert events.OutcomeEvents().filter(line) is True
    assert posted == [] and line.k8s_skip is False  # type: ignore[attr-defined]


def test_outside_an_operator_nothing_is_posted_and_nothing_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_queue(*args: object, **kwargs: object) -> None:
        raise LookupError("event_queue_var")

    monkeypatch.setattr(kopf, "event", no_queue)
    line = record(logging.INFO, "pending")
    assert events.OutcomeEvents().filter(line) is True
    assert line.k8s_skip is False  # type: ignore[attr-defined]


def test_enable_and_the_environment_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    logger = logging.getLogger(events.LOGGER)
    was = events._FILTER in logger.filters
    try:
        events.enable(False)
        events.enable(True)
        assert events._FILTER not in logger.filters  # nothing on Kopf's logger before an outcome line
        events.attach()
        events.attach()
        assert logger.filters.count(events._FILTER) == 1
        events.enable(False)
        assert events._FILTER not in logger.filters
        monkeypatch.setenv("KOPF_OUTCOMES_EVENTS", "0")
        events.enable(True)
        events.attach()
        assert events._FILTER not in logger.filters
    finally:
        monkeypatch.delenv("KOPF_OUTCOMES_EVENTS")
        events.enable(was)
        if was:
            events.attach()


def test_where_kopf_posts_no_log_lines_outcome_lines_post_none_either(posted: list[dict[str, Any]]) -> None:
    """Kopf >= 1.45 posts log lines only with ``settings.posting.loggers``: off, an outcome line
    is logged and posts nothing (posted anyway, 1,000 parked objects cost ~26 MiB: issue 33)."""
    line = record(logging.INFO, "pending")
    posting = line.settings.posting  # type: ignore[attr-defined]
    switch = hasattr(posting, "loggers")  # a Kopf without it (< 1.45) posts every line at its level
    if switch:
        posting.loggers = False
    assert events.OutcomeEvents().filter(line) is True  # still logged
    assert (len(posted), line.k8s_skip) == ((0, False) if switch else (1, True))  # type: ignore[attr-defined]


def test_posting_switched_off_posts_nothing_neither_ours_nor_kopfs(posted: list[dict[str, Any]]) -> None:
    line = record(logging.ERROR, "retry")
    line.settings.posting.enabled = False  # type: ignore[attr-defined]
    assert events.OutcomeEvents().filter(line) is True  # still logged
    assert posted == [] and line.k8s_skip is True  # type: ignore[attr-defined]


def test_a_line_below_a_raised_posting_level_posts_nothing(posted: list[dict[str, Any]]) -> None:
    line = record(logging.WARNING, "retry")
    line.settings.posting.level = logging.ERROR  # type: ignore[attr-defined]
    assert events.OutcomeEvents().filter(line) is True
    assert posted == [] and line.k8s_skip is False  # type: ignore[attr-defined]


@pytest.mark.parametrize("accepted", [True, False])
def test_the_series_poster_posts_and_kopf_event_only_where_it_cannot(
        posted: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, accepted: bool) -> None:
    series: list[tuple[Any, ...]] = []
    monkeypatch.setattr(events, "_series", lambda *args: series.append(args[1:]) or accepted)
    line = record(logging.WARNING, "retry")
    assert events.OutcomeEvents().filter(line) is True
    assert series == [(REF, "Warning", "Retrying", "Handler 'delete_fn' is pending: w")]
    assert len(posted) == (0 if accepted else 1)
    assert line.k8s_skip is True  # type: ignore[attr-defined]
