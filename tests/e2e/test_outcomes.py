"""Each outcome on the real API server: log levels, Event types, the finalizer, the next run."""
from __future__ import annotations

import asyncio

import pytest
from kubernetes_asyncio import client

from kopf_outcomes import memory
from kopf_outcomes.memory import RELEASE_ANNOTATION
from kopf_outcomes_testing.process import OperatorProcess, summary
from tests.e2e.conftest import create_example, eventually, get_example
from tests.e2e.releases import stamped

OPERATOR = "tests/e2e/operators/outcomes_operator.py"
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"


async def start_deleting(objects, namespace: str, name: str, spec: dict) -> None:
    await create_example(objects, namespace, name, spec)

    async def has_finalizer() -> bool:
        body = await get_example(objects, namespace, name)
        return body is not None and FINALIZER in (body["metadata"].get("finalizers") or [])

    await eventually(has_finalizer, what="the finalizer")
    await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", name)


def runs(op: OperatorProcess, handler: str = "delete_fn") -> int:
    return sum(1 for r in op.records() if r.message == f"Handler {handler!r} is invoked.")


async def events(api, namespace: str, name: str) -> list[tuple[str, str]]:
    listing = await client.CoreV1Api(api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}")
    return [(e.type, e.message) for e in listing.items]


async def finalized(objects, namespace: str, name: str) -> bool:
    body = await get_example(objects, namespace, name)
    return body is not None and FINALIZER in (body["metadata"].get("finalizers") or [])


async def gone(objects, namespace: str, name: str) -> bool:
    return await get_example(objects, namespace, name) is None


async def test_pending_is_quiet_keeps_the_finalizer_and_wakes_on_change(api, objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "p", {"onDelete": "pending"})
        record = await op.wait_for(lambda r: "is pending" in r.message, what="Pending")
        assert (record.level, record.message) == ("INFO", "Handler 'delete_fn' is pending: waiting for the test")
        await asyncio.sleep(3)
        assert runs(op) == 1  # parked: no busy loop, no timer
        assert await finalized(objects, namespace, "p")
        assert not [r for r in op.records() if "touch-dummy" in r.message or "Sleeping" in r.message]

        # A relevant change wakes it at once; still pending for the same reason: DEBUG only.
        await objects.patch_namespaced_custom_object(
            "kopf.dev", "v1", namespace, "kopfexamples", "p", {"spec": {"other": 1}},
            _content_type="application/merge-patch+json")
        await eventually(lambda: asyncio.sleep(0, runs(op) == 2), what="the second run")
        await asyncio.sleep(0.5)
        pendings = [(r.level, r.message) for r in op.records() if "is pending" in r.message]
        assert [level for level, _ in pendings] == ["INFO", "DEBUG"]

        await objects.patch_namespaced_custom_object(
            "kopf.dev", "v1", namespace, "kopfexamples", "p", {"spec": {"onDelete": "success"}},
            _content_type="application/merge-patch+json")
        await eventually(lambda: gone(objects, namespace, "p"), what="the object to go")
        records = op.records(f"{namespace}/p")
        assert not [r for r in records if r.level in ("WARNING", "ERROR")], summary(records)
        posted = await events(api, namespace, "p")
        assert ("Normal", "Handler 'delete_fn' is pending: waiting for the test") in posted
        assert not [event for event in posted if event[0] != "Normal"]


async def test_pending_with_recheck_runs_again_without_errors(objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "r", {"onDelete": "pending-recheck"})
        await eventually(lambda: asyncio.sleep(0, runs(op) >= 3), timeout=10, what="three rechecks")
        assert await finalized(objects, namespace, "r")
        levels = [r.level for r in op.records() if "is pending" in r.message]
        assert levels[0] == "INFO" and set(levels[1:]) == {"DEBUG"}
        assert not [r for r in op.records(f"{namespace}/r") if r.level in ("WARNING", "ERROR")]


async def test_retry_at_warning_posts_a_warning_event_and_retries(api, objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "w", {"onDelete": "retry-warning"})
        await eventually(lambda: asyncio.sleep(0, runs(op) >= 2), timeout=10, what="the retry")
        assert await finalized(objects, namespace, "w")
        retries = [(r.level, r.message) for r in op.records() if "failed temporarily" in r.message]
        assert retries[0] == ("WARNING", "Handler 'delete_fn' failed temporarily: busy")
        assert not [r for r in op.records(f"{namespace}/w") if r.level == "ERROR"]
        posted = await eventually(lambda: events(api, namespace, "w"), what="events")
        await asyncio.sleep(0.5)
        posted = await events(api, namespace, "w")
        assert ("Warning", "Handler 'delete_fn' failed temporarily: busy") in posted
        assert not [event for event in posted if event[0] == "Error"]


async def test_fatal_retained_keeps_the_object_until_released_by_annotation(api, objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "f", {"onDelete": "fatal-retain"})
        record = await op.wait_for(lambda r: "failed permanently" in r.message, what="Fatal")
        assert record.level == "ERROR"
        await asyncio.sleep(2)
        assert runs(op) == 1 and await finalized(objects, namespace, "f")
        # An unrelated change does not re-run a permanently failed handler.
        await objects.patch_namespaced_custom_object(
            "kopf.dev", "v1", namespace, "kopfexamples", "f", {"spec": {"other": 1}},
            _content_type="application/merge-patch+json")
        await asyncio.sleep(1)
        assert runs(op) == 1 and await finalized(objects, namespace, "f")

        await objects.patch_namespaced_custom_object(
            "kopf.dev", "v1", namespace, "kopfexamples", "f",
            {"metadata": {"annotations": {RELEASE_ANNOTATION: await stamped(objects, namespace, "f", "delete_fn")}}},
            _content_type="application/merge-patch+json")
        await eventually(lambda: gone(objects, namespace, "f"), what="the released object to go")
        assert runs(op) == 1  # released without running the handler again
        posted = await events(api, namespace, "f")
        assert [t for t, m in posted if "failed permanently" in m] == ["Error"]


async def test_fatal_releases_by_default(objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "g", {"onDelete": "fatal"})
        await eventually(lambda: gone(objects, namespace, "g"), what="the object to go")
        messages = [(r.level, r.message) for r in op.records(f"{namespace}/g")]
        assert ("ERROR", "Handler 'delete_fn' failed permanently: broken beyond repair") in messages


@pytest.mark.parametrize("value, expected", [(False, "pending"), ("yes", "error")])
async def test_explicit_completion(objects, namespace, operator, value, expected):
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "x", {"explicit": value})
        if expected == "pending":
            record = await op.wait_for(lambda r: r.message.startswith("Handler 'explicit_fn/spec.explicit' is pending"),
                                       what="Pending")
            assert record.level == "INFO"
        else:
            record = await op.wait_for(lambda r: r.message.startswith("Handler 'explicit_fn/spec.explicit' failed"),
                                       what="the error")
            assert record.level == "ERROR"
            assert "explicit completion expects True or False, got 'yes'" in record.message
        await asyncio.sleep(1)
        assert await finalized(objects, namespace, "x")
        await objects.patch_namespaced_custom_object(
            "kopf.dev", "v1", namespace, "kopfexamples", "x", {"spec": {"explicit": True}},
            _content_type="application/merge-patch+json")
        await eventually(lambda: gone(objects, namespace, "x"), timeout=10, what="completion")


async def test_an_observer_failing_on_a_release_retries_the_release_not_the_handler(objects, namespace, operator):
    """The failing cycle's own write brings an event at once: the retry waits its delay (no busy
    loop), then releases; the handler never runs again, and the person's annotation is not lost."""
    async with operator("tests/e2e/operators/release_observer_operator.py") as op:
        await start_deleting(objects, namespace, "o", {})
        await op.wait_for(lambda r: "failed permanently" in r.message, what="the retention")

        async def retained() -> str | None:
            body = await get_example(objects, namespace, "o") or {}
            if memory.DEFAULT_KEYS.memory not in (body["metadata"].get("annotations") or {}):
                return None  # the retention's PATCH is not there yet
            return await stamped(objects, namespace, "o", "delete_fn")

        release = await eventually(retained, what="the retained record")
        await objects.patch_namespaced_custom_object(
            "kopf.dev", "v1", namespace, "kopfexamples", "o",
            {"metadata": {"annotations": {RELEASE_ANNOTATION: release}}}, _content_type="application/merge-patch+json")
        retried = await op.wait_for(lambda r: "The release of Handler 'delete_fn' is retried in 2 s" in r.message,
                                    what="the release retried")
        assert retried.level == "ERROR" and "the metrics backend is down" in retried.message
        await eventually(lambda: gone(objects, namespace, "o"), what="the released object to go")
        assert runs(op) == 1  # the retained handler never ran again
        [released] = [r for r in op.records() if "is released by the annotation" in r.message]
        assert released.time - retried.time >= 1.9  # attempted again at its retry's delay, not on its own write's event
