"""
Every API call of the harness goes through one retry policy, as a real client's would.

A busy API server answers 429 (with ``Retry-After``; e.g. "storage is (re)initializing" right
after a CRD is created), a 5xx, or drops a connection. Such a call is tried again, honouring
``Retry-After`` (else an exponential backoff with jitter), within a budget of attempts and
seconds per call; only when the budget is spent does the call fail (:class:`RetriesExhausted`),
and with it the scenario. Every retry is counted by cause, so that the report shows how bumpy
the run was.
"""
from __future__ import annotations

import asyncio
import collections
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import tenacity
from kubernetes_asyncio import client

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class Budget:
    """How hard one call tries: at most ``attempts`` tries within ``seconds`` of the first."""

    attempts: int = 12
    seconds: float = 120.0
    backoff_s: float = 0.25  # the first wait without Retry-After; doubled per retry ...
    backoff_max_s: float = 8.0  # ... up to this


DEFAULT_BUDGET = Budget()


class RetriesExhausted(Exception):
    """A call still failed when its retry budget was spent; the last error is its ``__cause__``."""


def cause(error: BaseException) -> str | None:
    """Why a failed call is worth another try ("429", "503", "connection"), or None if it is not."""
    if isinstance(error, client.ApiException):
        status = int(error.status or 0)
        return str(status) if status == 429 or status >= 500 else None
    if isinstance(error, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError,
                          ConnectionError, asyncio.TimeoutError)):
        return "connection"
    return None


def retry_after(error: BaseException) -> float | None:
    """The server's ``Retry-After``, in seconds (the delta form, as kube-apiserver sends it)."""
    headers = getattr(error, "headers", None)
    value = headers.get("Retry-After") if headers else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # the HTTP-date form: fall back to the backoff
        return None


@dataclass
class Retries:
    """The retries made (by cause), the seconds waited between them, the calls given up."""

    by_cause: collections.Counter[str] = field(default_factory=collections.Counter)
    waited_s: float = 0.0
    gave_up: int = 0

    def record(self, why: str, waited: float) -> None:
        self.by_cause[why] += 1
        self.waited_s += waited

    def add(self, other: Retries) -> None:
        self.by_cause.update(other.by_cause)
        self.waited_s += other.waited_s
        self.gave_up += other.gave_up

    def report(self) -> dict[str, Any]:
        return {"total": sum(self.by_cause.values()), "by_cause": dict(sorted(self.by_cause.items())),
                "waited_s": round(self.waited_s, 2), "gave_up": self.gave_up}


async def call(fn: Callable[[], Awaitable[T]], *, what: str, retries: Retries,
               budget: Budget = DEFAULT_BUDGET, sleep: Sleep = asyncio.sleep) -> T:
    """``await fn()``, tried again on a retryable failure until the budget is spent."""
    backoff = (tenacity.wait_exponential(multiplier=budget.backoff_s, max=budget.backoff_max_s)
               + tenacity.wait_random(0, budget.backoff_s))

    def wait(state: tenacity.RetryCallState) -> float:
        after = retry_after(_error(state))  # honoured; the jitter spreads a burst's retries
        return backoff(state) if after is None else after + random.uniform(0, budget.backoff_s)

    def before_sleep(state: tenacity.RetryCallState) -> None:
        retries.record(cause(_error(state)) or "?", state.upcoming_sleep)

    retrying = tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception(lambda e: cause(e) is not None),
        stop=tenacity.stop_after_attempt(budget.attempts) | tenacity.stop_before_delay(budget.seconds),
        wait=wait, sleep=sleep, before_sleep=before_sleep)
    async def attempt() -> T:  # a coroutine function: tenacity awaits only what it sees as one
        return await fn()

    try:
        return await retrying(attempt)
    except tenacity.RetryError as e:
        retries.gave_up += 1
        last = e.last_attempt.exception()
        raise RetriesExhausted(
            f"{what}: gave up after {e.last_attempt.attempt_number} attempts "
            f"(budget: {budget.attempts} attempts, {budget.seconds:g} s): {type(last).__name__}: {last}"
        ) from last


def _error(state: tenacity.RetryCallState) -> BaseException:
    assert state.outcome is not None
    error = state.outcome.exception()
    assert error is not None
    return error


class RetryingApiClient(client.ApiClient):
    """kubernetes-asyncio's client with every request made through :func:`call`.

    ``retries`` counts them; the harness swaps in a fresh :class:`Retries` per scenario.
    """

    def __init__(self, configuration: client.Configuration, *, budget: Budget = DEFAULT_BUDGET) -> None:
        super().__init__(configuration)
        self.budget = budget
        self.retries = Retries()

    async def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        send = super().request
        return await call(lambda: send(method, url, *args, **kwargs), what=f"{method} {url}",
                          retries=self.retries, budget=self.budget)
