"""Fast unit tests of our own logic: no cluster, no network, no sleeping."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

import kopf_outcomes
from kopf_outcomes import installation, memory, objects
from kopf_outcomes._kopf import held, listing
from kopf_outcomes.digest import hashed, state


def digest(body: Mapping[str, Any], **scope: Any) -> str:
    """The digest of the state of ``body`` in this scope, as a cycle makes it."""
    return hashed(state(body, **scope))


class Collector(logging.Handler):
    """Keeps every record it is given, for asserting on levels and messages."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self, level: int | None = None) -> list[str]:
        return [r.getMessage() for r in self.records if level is None or r.levelno == level]

    def pairs(self) -> list[tuple[int, str]]:
        return [(r.levelno, r.getMessage()) for r in self.records]


@pytest.fixture
def logger(request: pytest.FixtureRequest) -> Iterator[logging.Logger]:
    """A private logger at DEBUG that does not propagate into other tests' output."""
    log = logging.getLogger(f"tests.unit.{request.node.nodeid}")
    log.setLevel(logging.DEBUG)
    log.propagate = False
    yield log
    log.handlers.clear()


@pytest.fixture
def collector(logger: logging.Logger) -> Collector:
    handler = Collector()
    logger.addHandler(handler)
    return handler


@pytest.fixture(autouse=True)
def _fresh_garbage_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    """``memory._reported_garbage`` is module-level: each test starts with none reported."""
    monkeypatch.setattr(memory, "_reported_garbage", type(memory._reported_garbage)())


@pytest.fixture(autouse=True)
def _no_watchers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where Kopf's watchers watch (``listing``) is module-level: each test starts with none seen."""
    monkeypatch.setattr(listing, "_scopes", {})
    monkeypatch.setattr(listing, "_watching", set())
    monkeypatch.setattr(listing, "_namespaced", {})
    monkeypatch.setattr(listing, "_resources", {})
    monkeypatch.setattr(listing, "_ended", {})
    monkeypatch.setattr(listing, "_insights", [])


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The variables that steer plugin discovery and policies must not leak in from outside."""
    for name in ("KOPF_OUTCOMES_PLUGINS", "KOPF_OUTCOMES_DISABLE_PLUGINS", "KOPF_OUTCOMES_POLICY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def unpatched() -> Iterator[None]:
    """Kopf starts unpatched and is left unpatched, whatever the test did."""
    kopf_outcomes.uninstall()
    yield
    kopf_outcomes.uninstall()


@pytest.fixture
def fake_apply(installed: object, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Kopf's own apply() behind the patched one, replaced by a recorder (``installed``: the module's)."""
    calls: list[dict[str, Any]] = []

    async def original(**kwargs: Any) -> str:
        calls.append(kwargs)
        return "applied"

    assert installation._patch is not None
    monkeypatch.setattr(installation._patch, "_apply", original)
    return calls


@pytest.fixture(autouse=True)
def _no_last_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """What each watched object was last indexed under (``objects._last_keys``) is module-level, by
    uid: a body of one test must not wake by another test's keys (order-dependent tests)."""
    monkeypatch.setattr(objects, "_last_keys", type(objects._last_keys)())
    monkeypatch.setattr(held, "_unseen", set())  # and the resources a shard told about once
