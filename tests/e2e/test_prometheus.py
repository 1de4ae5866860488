"""
The Prometheus plugin's story on the real API server, ``/metrics`` scraped and checked exactly
after each step: objects through Pending → Success, a Retry, a retained Fatal, and an operator
restart while objects are parked (the waiting gauge must be right without a handler run).
"""
from __future__ import annotations

import asyncio
import socket
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from kopf_outcomes.memory import RELEASE_ANNOTATION
from kopf_outcomes_testing.cluster.audit import AuditLog
from tests.e2e.conftest import eventually
from tests.e2e.releases import stamped
from tests.e2e.test_outcomes import gone, start_deleting

OPERATOR = "tests/e2e/operators/metrics_operator.py"
R = "kopfexamples.v1.kopf.dev"
OUTCOMES = "kopf_outcomes_handler_outcomes_total"
WAITING = "kopf_outcomes_handlers_waiting"
WAITED = "kopf_outcomes_handler_wait_seconds"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def scrape(port: int, *, activities: bool = False) -> Samples:
    """The plugin's samples of the example resource (``activities``: of Kopf's activities instead);
    of the histogram only the counts (the sums are times, checked apart)."""
    def get() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return str(response.read().decode())
    found: Samples = {}
    for family in text_string_to_metric_families(await asyncio.to_thread(get)):
        for s in family.samples:
            if s.labels.get("resource") != ("" if activities else R):
                continue
            if s.name.startswith("kopf_outcomes_") and not s.name.endswith(("_created", "_bucket", "_sum")):
                found[(s.name, frozenset(s.labels.items()))] = s.value
    return found


async def scrape_sum(port: int) -> float:
    """The wait histogram's sum for the delete handler (seconds)."""
    def get() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return str(response.read().decode())
    return sum(s.value for family in text_string_to_metric_families(await asyncio.to_thread(get))
               for s in family.samples if s.name == f"{WAITED}_sum" and s.labels.get("handler") == "delete_fn")


def outcomes(**counts: float) -> Samples:
    """``pending=2, retry_warning=1`` → the outcome counter's samples."""
    samples: Samples = {}
    for key, count in counts.items():
        outcome, _, level = key.partition("_")
        labels = {"resource": R, "handler": "delete_fn", "outcome": outcome, "level": level}
        samples[(OUTCOMES, frozenset(labels.items()))] = count
    return samples


def waiting(**counts: float) -> Samples:
    return {(WAITING, frozenset({"resource": R, "handler": "delete_fn", "state": state}.items())): count
            for state, count in counts.items()}


def waited(count: float) -> Samples:
    return {(f"{WAITED}_count", frozenset({"resource": R, "handler": "delete_fn", "cause": "delete"}.items())): count}


async def settles_at(port: int, expected: Samples, what: str) -> None:
    """Scrape until the metrics are exactly as expected (the operator works asynchronously)."""
    last: list[Samples] = []

    async def exact() -> bool:
        last[:] = [await scrape(port)]
        return last[0] == expected
    try:
        await eventually(exact, timeout=20, interval=0.2, what=what)
    except AssertionError:
        assert last[0] == expected, what  # pytest shows the difference


async def patch_spec(objects, namespace: str, name: str, spec: dict) -> None:
    await objects.patch_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", name, {"spec": spec},
                                                 _content_type="application/merge-patch+json")


async def test_metrics_story_with_a_restart_while_parked(cluster, objects, namespace, operator):
    port = free_port()
    env = {"KOPF_OUTCOMES_PLUGINS": "prometheus", "KOPF_OUTCOMES_PROMETHEUS_ADDRESS": f"127.0.0.1:{port}"}
    async with operator(OPERATOR, **env) as op:
        await settles_at(port, {}, "no samples before any run")
        # Kopf's login activity ran, but a login handler is a stock kind (kinds.STOCK): no plugin,
        # policy or observer sees it (a global explicit_completion broke the login), so no sample.
        assert await scrape(port, activities=True) == {}

        # Three objects wait for an external system.
        for name in ("p1", "p2", "p3"):
            await start_deleting(objects, namespace, name, {"onDelete": "pending"})
        p3_pending_at = time.time()
        await settles_at(port, {**outcomes(pending=3), **waiting(pending=3)}, "three pending")

        # Two of them are called back: Pending → Success, and each wait is measured once.
        for name in ("p1", "p2"):
            await patch_spec(objects, namespace, name, {"onDelete": "success"})
        for name in ("p1", "p2"):
            await eventually(lambda name=name: gone(objects, namespace, name), what=f"{name} to go")
        await settles_at(port, {**outcomes(pending=3, success=2), **waiting(pending=1), **waited(2)},
                         "two succeeded")

        # One retries (a WARNING, 3 s), then succeeds after its delay.
        await start_deleting(objects, namespace, "r", {"onDelete": "retry", "delay": 3})
        await settles_at(port, {**outcomes(pending=3, success=2, retry_warning=1),
                                **waiting(pending=1, retrying=1), **waited(2)}, "one retrying")
        await patch_spec(objects, namespace, "r", {"onDelete": "success"})
        await eventually(lambda: gone(objects, namespace, "r"), what="r to go")
        await settles_at(port, {**outcomes(pending=3, success=3, retry_warning=1),
                                **waiting(pending=1, retrying=0), **waited(3)}, "the retry succeeded")

        # One fails for good on deletion, and its finalizer is retained.
        await start_deleting(objects, namespace, "f", {"onDelete": "fatal-retain"})
        await settles_at(port, {**outcomes(pending=3, success=3, retry_warning=1, fatal_error=1),
                                **waiting(pending=1, retrying=0, retained=1), **waited(3)}, "one retained")

    # Restarted while p3 is parked and f is retained: nothing runs, nothing is written,
    # and the waiting gauge is right at once; the counters of the new process start at zero.
    restarted_at = time.time()
    audit = AuditLog(cluster.audit_log)
    mark = audit.mark()
    port = free_port()
    env["KOPF_OUTCOMES_PROMETHEUS_ADDRESS"] = f"127.0.0.1:{port}"
    async with operator(OPERATOR, **env) as op:
        await settles_at(port, waiting(pending=1, retained=1), "the waiting gauge after the restart")
        await asyncio.sleep(1)
        assert [r.message for r in op.records() if r.message.startswith("Handler ")] == []
        assert audit.writes(since=mark, user_agent="kopf", namespace=namespace, resource="kopfexamples") == []

        # A person releases the retained finalizer; the last one is called back.
        await objects.patch_namespaced_custom_object(
            "kopf.dev", "v1", namespace, "kopfexamples", "f",
            {"metadata": {"annotations": {RELEASE_ANNOTATION: await stamped(objects, namespace, "f", "delete_fn")}}},
            _content_type="application/merge-patch+json")
        await eventually(lambda: gone(objects, namespace, "f"), what="f to go")
        await patch_spec(objects, namespace, "p3", {"onDelete": "success"})
        await eventually(lambda: gone(objects, namespace, "p3"), what="p3 to go")
        # p3's wait began before the restart: measured from its memory's "since", not lost.
        await settles_at(port, {**outcomes(fatal_error=1, success=1), **waiting(pending=0, retained=0),
                                **waited(1)}, "all released")
        waited_sum = await scrape_sum(port)
        assert waited_sum >= restarted_at - p3_pending_at > 3, (waited_sum, restarted_at - p3_pending_at)


FAILED = "Handler 'delete_fn' failed temporarily: plugin 'broken' failed:"


async def test_plugin_failures_are_counted_by_plugin(objects, namespace, operator):
    port = free_port()
    async with operator(OPERATOR, KOPF_OUTCOMES_PLUGINS="prometheus,broken",
                        KOPF_OUTCOMES_PROMETHEUS_ADDRESS=f"127.0.0.1:{port}") as op:
        await start_deleting(objects, namespace, "b", {"onDelete": "success"})
        key = ("kopf_outcomes_plugin_failures_total", frozenset({("plugin", "broken")}))

        async def counted_as_logged() -> bool:  # the handler is retried every second: both grow
            logged = len([r for r in op.records(f"{namespace}/b") if r.message.startswith(FAILED)])
            samples = await scrape_failures()  # these samples have no resource label
            return logged >= 2 and samples.get(key) == logged

        async def scrape_failures() -> Samples:
            def get() -> str:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                    return str(response.read().decode())
            return {(s.name, frozenset(s.labels.items())): s.value
                    for family in text_string_to_metric_families(await asyncio.to_thread(get))
                    for s in family.samples if s.name == key[0]}

        try:
            await eventually(counted_as_logged, timeout=20, interval=0.1, what="the failures counted as logged")
        except AssertionError:
            logged = [r.message for r in op.records(f"{namespace}/b") if r.message.startswith(FAILED)]
            raise AssertionError(f"scraped {await scrape_failures()}, logged {len(logged)}") from None


async def test_an_object_that_leaves_while_waiting_leaves_the_waiting_gauge(objects, namespace, operator):
    port = free_port()
    env = {"KOPF_OUTCOMES_PLUGINS": "prometheus", "KOPF_OUTCOMES_PROMETHEUS_ADDRESS": f"127.0.0.1:{port}"}
    async with operator(OPERATOR, **env):
        await start_deleting(objects, namespace, "g", {"onDelete": "pending"})
        await settles_at(port, {**outcomes(pending=1), **waiting(pending=1)}, "one pending")
        # A person gives up on it and removes the finalizer: the object goes while it waits.
        await objects.patch_namespaced_custom_object(
            "kopf.dev", "v1", namespace, "kopfexamples", "g", {"metadata": {"finalizers": None}},
            _content_type="application/merge-patch+json")
        await eventually(lambda: gone(objects, namespace, "g"), what="g to go")
        await settles_at(port, {**outcomes(pending=1), **waiting(pending=0)}, "nothing waits")
