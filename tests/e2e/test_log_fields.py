"""Outcome details as structured fields in Kopf's JSON log format (`kopf run --log-format=json`)."""
from __future__ import annotations

import json

from tests.e2e.test_outcomes import OPERATOR, start_deleting


def json_lines(op, containing: str) -> list[dict]:
    lines = (json.loads(line) for line in op.text().splitlines() if line.startswith("{"))
    return [line for line in lines if containing in line.get("message", "")]


async def test_outcome_fields_in_json_logs(objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "p", {"onDelete": "pending-recheck"})
        await op.wait_for(lambda r: "is pending" in r.message, what="Pending")
        pending = json_lines(op, "is pending")[0]
        assert (pending["handler"], pending["outcome"], pending["reason"], pending["recheck"]) == \
               ("delete_fn", "pending", "rechecking", 1.0)
        await start_deleting(objects, namespace, "w", {"onDelete": "retry-warning"})
        await op.wait_for(lambda r: "failed temporarily: busy" in r.message, what="Retry")
        retry = json_lines(op, "failed temporarily: busy")[0]
        assert (retry["outcome"], retry["reason"], retry["delay"], retry["severity"]) == ("retry", "busy", 1.0, "warn")
