"""
Outcome details as structured fields of Kopf's JSON log (``kopf run --log-format=json``).

Kopf's JSON formatter (python-json-logger) writes every attribute of a log record that is not a
standard one: fields passed with ``extra=`` become JSON fields. The first test shows that on the
real operator; the second checks the core's outcome lines, the retained finalizer included. The
third: the Kubernetes Events with a reason per outcome (kopf_outcomes.events).
"""
from __future__ import annotations

import asyncio
import json

from tests.e2e.conftest import create_example
from tests.e2e.test_outcomes import start_deleting

OPERATOR = "tests/e2e/operators/logs_operator.py"


def json_lines(text: str) -> list[dict]:
    lines = []
    for line in text.splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            lines.append(data)
    return lines


async def test_fields_given_as_extra_are_fields_of_kopfs_json_log(objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await create_example(objects, namespace, "x")
        await op.wait_for(lambda r: r.message == "structured probe", what="the probe")
        [line] = [data for data in json_lines(op.text()) if data.get("message") == "structured probe"]
        assert {key: line[key] for key in ("handler", "outcome", "reason", "recheck")} == \
               {"handler": "create_fn", "outcome": "pending", "reason": "waiting", "recheck": 30.0}
        assert line["object"]["name"] == "x" and line["object"]["namespace"] == namespace
        assert line["severity"] == "info"


async def test_outcome_lines_carry_the_outcome_as_fields(objects, namespace, operator):
    """The retained finalizer too (tests/e2e/test_log_fields.py covers Pending and Retry)."""
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "p", {"onDelete": "pending"})
        await start_deleting(objects, namespace, "r", {"onDelete": "retry"})
        await start_deleting(objects, namespace, "f", {"onDelete": "fatal-retain"})
        for text in ("is pending", "failed temporarily", "failed permanently"):
            await op.wait_for(lambda r, text=text: text in r.message, what=text)
        lines = {data["object"]["name"]: data for data in json_lines(op.text())
                 if str(data.get("message")).startswith("Handler 'delete_fn' ") and data.get("object")
                 and any(t in data["message"] for t in ("is pending", "failed temporarily", "failed permanently"))}
        fields = ("handler", "outcome", "reason", "recheck", "delay")
        assert {name: {k: line.get(k) for k in fields} for name, line in lines.items()} == {
            "p": {"handler": "delete_fn", "outcome": "pending", "reason": "waiting for the external system",
                  "recheck": 600.0, "delay": None},
            "r": {"handler": "delete_fn", "outcome": "retry", "reason": "the external system is busy",
                  "recheck": None, "delay": 600.0},
            "f": {"handler": "delete_fn", "outcome": "retained", "reason": "the external system lost the record",
                  "recheck": None, "delay": None},
        }
        assert (lines["r"]["severity"], lines["f"]["severity"]) == ("warn", "error")


async def test_outcome_events_have_a_reason_per_outcome(api, objects, namespace, operator):
    """Pending → callback → gone shows Pending then Succeeded; Retry, Fatal with the finalizer
    retained have their own reasons; the type follows the level; a quiet recheck posts none;
    no outcome line is posted again as Kopf's generic Logging Event."""
    from kubernetes_asyncio import client

    from tests.e2e.conftest import eventually

    async def events(name: str) -> list[tuple[str, str]]:
        listing = await client.CoreV1Api(api).list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={name}")
        return [(e.type, e.reason) for e in listing.items if "delete_fn" in (e.message or "")]

    async def reasons(name: str) -> set[tuple[str, str]]:
        return set(await events(name))

    # This operator posts log lines as Events (settings.posting.loggers on Kopf >= 1.45).
    async with operator("tests/e2e/operators/outcomes_operator.py"):
        await start_deleting(objects, namespace, "p", {"onDelete": "pending"})
        await start_deleting(objects, namespace, "r", {"onDelete": "retry-warning"})
        await start_deleting(objects, namespace, "f", {"onDelete": "fatal-retain"})
        await start_deleting(objects, namespace, "q", {"onDelete": "pending-recheck"})
        for name in ("p", "r", "f", "q"):
            await eventually(lambda name=name: reasons(name), what=f"{name}'s events")
        assert await reasons("p") == {("Normal", "Pending")}
        assert ("Warning", "Retrying") in await reasons("r")
        assert await reasons("f") == {("Error", "FinalizerRetained")}
        # The callback: p's state changes, the handler succeeds, the object goes.
        await objects.patch_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", "p",
                                                     {"spec": {"onDelete": "success"}},
                                                     _content_type="application/merge-patch+json")
        await eventually(lambda: reasons_has(events, "p", ("Normal", "Succeeded")), what="p's Succeeded Event")
        assert sorted(set(await events("p"))) == [("Normal", "Pending"), ("Normal", "Succeeded")]
        # Pending(recheck=1) has run again every second since, quietly: one Pending Event, no more.
        await asyncio.sleep(4)
        assert await events("q") == [("Normal", "Pending")]


async def reasons_has(events, name: str, wanted: tuple[str, str]) -> bool:
    return wanted in await events(name)
