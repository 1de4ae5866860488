"""The harness's retry policy, with a fake call and an injected sleep: no time passes."""
from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiohttp
import pytest
from kubernetes_asyncio import client
from multidict import CIMultiDict, CIMultiDictProxy

from benchmarks.retries import Budget, Retries, RetriesExhausted, call, cause, retry_after


def api_error(status: int, retry_after_s: str | None = None) -> client.ApiException:
    error = client.ApiException(status=status, reason="test")
    headers = {"Retry-After": retry_after_s} if retry_after_s is not None else {}
    error.headers = CIMultiDictProxy(CIMultiDict(headers))  # as aiohttp gives them
    return error


class Flaky:
    """Fails with the given errors, one per call, then returns "ok"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def fake_sleep() -> tuple[list[float], Callable[[float], Awaitable[None]]]:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    return slept, sleep


async def test_429_is_retried_after_the_servers_retry_after() -> None:
    slept, sleep = fake_sleep()
    retries = Retries()
    fn = Flaky(api_error(429, "3"), api_error(429, "1"))
    # A plain function returning an awaitable, as the API client's request() is.
    assert await call(lambda: fn(), what="GET /x", retries=retries, sleep=sleep) == "ok"
    assert fn.calls == 3
    assert 3 <= slept[0] <= 3 + Budget().backoff_s
    assert 1 <= slept[1] <= 1 + Budget().backoff_s
    assert retries.report() == {"total": 2, "by_cause": {"429": 2}, "waited_s": round(sum(slept), 2),
                                "gave_up": 0}


async def test_5xx_and_dropped_connections_are_retried_with_a_growing_backoff() -> None:
    slept, sleep = fake_sleep()
    retries = Retries()
    fn = Flaky(api_error(503), api_error(500), aiohttp.ServerDisconnectedError(), api_error(504))
    budget = Budget(backoff_s=0.5, backoff_max_s=100)
    assert await call(fn, what="GET /x", retries=retries, budget=budget, sleep=sleep) == "ok"
    assert retries.by_cause == {"503": 1, "500": 1, "connection": 1, "504": 1}
    # exponential: 0.5, 1, 2, 4 plus a jitter of at most 0.5
    for n, seconds in enumerate(slept):
        assert 0.5 * 2 ** n <= seconds <= 0.5 * 2 ** n + 0.5


async def test_other_errors_are_not_retried() -> None:
    slept, sleep = fake_sleep()
    retries = Retries()
    fn = Flaky(api_error(404))
    with pytest.raises(client.ApiException) as raised:
        await call(fn, what="GET /x", retries=retries, sleep=sleep)
    assert raised.value.status == 404
    assert fn.calls == 1 and slept == [] and retries.report()["total"] == 0


async def test_the_attempts_budget_spent_fails_with_the_last_error_named() -> None:
    slept, sleep = fake_sleep()
    retries = Retries()
    fn = Flaky(*[api_error(429, "1")] * 10)
    with pytest.raises(RetriesExhausted, match=r"PATCH /y: gave up after 4 attempts.*429") as raised:
        await call(fn, what="PATCH /y", retries=retries, budget=Budget(attempts=4), sleep=sleep)
    assert isinstance(raised.value.__cause__, client.ApiException)
    assert fn.calls == 4 and len(slept) == 3
    assert retries.report()["total"] == 3 and retries.gave_up == 1


async def test_a_retry_after_beyond_the_seconds_budget_gives_up_without_waiting() -> None:
    slept, sleep = fake_sleep()
    retries = Retries()
    fn = Flaky(api_error(503, "30"))
    with pytest.raises(RetriesExhausted, match="gave up after 1 attempts"):
        await call(fn, what="GET /z", retries=retries, budget=Budget(seconds=10), sleep=sleep)
    assert fn.calls == 1 and slept == [] and retries.gave_up == 1


def test_what_is_retryable_and_the_retry_after_forms() -> None:
    assert cause(api_error(429)) == "429"
    assert cause(api_error(502)) == "502"
    assert cause(api_error(409)) is None
    assert cause(aiohttp.ClientConnectorError.__new__(aiohttp.ClientConnectorError)) == "connection"
    assert cause(TimeoutError()) == "connection"
    assert cause(ValueError()) is None
    assert retry_after(api_error(429, "2")) == 2.0
    assert retry_after(api_error(429, "Wed, 21 Oct 2015 07:28:00 GMT")) is None
    assert retry_after(api_error(429)) is None
    assert retry_after(ValueError()) is None
