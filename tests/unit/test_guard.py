"""
The finalizer guard: with ``fatal_on_delete="retain"``, every final failure of a deletion
handler keeps the finalizer until a person releases the object, ours and stock Kopf's alike,
with or without a policy or plugin; the release annotation then releases each.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import kopf
import pytest

import kopf_outcomes
from kopf_outcomes import Pending, Retry, handler_options
from kopf_outcomes._kopf.marks import PARKED_DELAY, RETAINED_MARK
from kopf_outcomes.memory import RELEASE_ANNOTATION
from tests.unit.kopf_objects import Reason, body_after, changing_cause, handler, parked_state, run_handlers
from tests.unit.releases import stamped
from tests.unit.test_patched_execution import BODY, Counted, raising, returning

# Each path by which Kopf (or a Retry) ends a deletion handler for good: (the handler's
# function, Kopf's handler options, what Kopf alone would say).
PATHS: dict[str, tuple[Callable[[], Counted], dict[str, Any], str]] = {
    "temporary-error-retries-exhausted": (lambda: raising(kopf.TemporaryError("flaky", delay=0)),
                                          {"retries": 1}, "exceed"),
    "retry-retries-exhausted": (lambda: returning(Retry("flaky", delay=0)), {"retries": 1}, "exceed"),
    "pending-past-timeout": (lambda: returning(Pending("waiting")), {"timeout": 0.0}, "has timed out"),
    "errors-permanent": (lambda: raising(ValueError("bug")), {"errors": "PERMANENT"}, "bug"),
    "permanent-error": (lambda: raising(kopf.PermanentError("gone")), {}, "gone"),
}


@pytest.fixture(params=["no plugins", "a policy"])
def installed(request: pytest.FixtureRequest, unpatched: None, tmp_path: Any) -> Any:
    if request.param == "a policy":
        policy = tmp_path / "policy.toml"
        policy.write_text('remember = false\n')
        return kopf_outcomes.install(entry_points=False, policy=policy)
    return kopf_outcomes.install(entry_points=False)


async def run_until_done(h: Any, cause: Any, logger: logging.Logger) -> tuple[dict[str, Any], Any, Any]:
    """Kopf's cycles of one handler until it is done or ours (Kopf < 1.38 ends an exhausted
    TemporaryError at the next run's check, not by looking ahead): the last outcomes, state, cause."""
    state = parked_state([h], {})
    for _ in range(3):
        outcomes = await run_handlers([h], cause, state)
        state = state.with_outcomes(outcomes)
        if outcomes["h"].final or str(outcomes["h"].exception).endswith(RETAINED_MARK):
            return outcomes, state, cause
        cause = changing_cause(body_after(cause), logger, reason=cause.reason)
    raise AssertionError(f"not done after 3 runs: {outcomes}")


@pytest.mark.parametrize("path", PATHS)
async def test_retain_holds_on_every_path_and_the_annotation_releases_it(
        path: str, installed: Any, logger: logging.Logger) -> None:
    make, options, stock_words = PATHS[path]
    fn = make()
    handler_options(fatal_on_delete="retain")(fn.fn)
    h = handler(fn.fn, **options)
    cause = changing_cause(BODY, logger, reason=Reason.DELETE)

    outcomes, state, cause = await run_until_done(h, cause, logger)

    outcome = outcomes["h"]
    assert (outcome.final, outcome.delay) == (False, PARKED_DELAY)  # the finalizer is kept
    assert str(outcome.exception).endswith(RETAINED_MARK)
    assert stock_words in str(outcome.exception)

    assert await run_handlers([h], changing_cause(body_after(cause, spec={"size": 2}), logger), state) == {}
    released = body_after(cause)
    released["metadata"]["annotations"][RELEASE_ANNOTATION] = stamped(released["metadata"]["annotations"], "h")
    outcomes = await run_handlers([h], changing_cause(released, logger), state)
    assert outcomes["h"].final is True  # released: Kopf removes the finalizer when all are done


@pytest.mark.parametrize("path", PATHS)
async def test_without_retain_every_path_is_final_as_in_stock_kopf(
        path: str, installed: Any, logger: logging.Logger) -> None:
    make, options, _ = PATHS[path]
    outcomes, _, _ = await run_until_done(handler(make().fn, **options), changing_cause(BODY, logger,
                                                                                     reason=Reason.DELETE), logger)
    assert outcomes["h"].final is True and outcomes["h"].exception is not None


@pytest.mark.parametrize("path", PATHS)
async def test_retain_is_about_deletion_only(path: str, installed: Any, logger: logging.Logger) -> None:
    make, options, _ = PATHS[path]
    fn = make()
    handler_options(fatal_on_delete="retain")(fn.fn)
    outcomes, _, _ = await run_until_done(handler(fn.fn, **options), changing_cause(BODY, logger, reason=Reason.UPDATE),
                                       logger)
    assert outcomes["h"].final is True
