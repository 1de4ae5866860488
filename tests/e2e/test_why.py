"""
``kopf-outcomes why`` / ``stuck`` (and ``kubectl outcomes``) on the real API server: pending,
retrying, retained, fatal-released and succeeded handlers, with Kopf's progress in annotations,
in the status, and under a non-default prefix. Reading costs the parked objects no write.
"""
from __future__ import annotations

import asyncio
import datetime
import json
import os
import shlex
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from kopf_outcomes_testing.cluster.audit import AuditLog
from tests.e2e.conftest import eventually
from tests.e2e.releases import stamped
from tests.e2e.test_outcomes import FINALIZER, gone, start_deleting

OPERATOR = "tests/e2e/operators/why_operator.py"
BIN = Path(sys.executable).parent
# name → (spec, the states why shows)
OBJECTS = {
    "pending": ({"onDelete": "pending"}, {"delete_fn": "pending", "cleanup_fn": "succeeded"}),
    "retrying": ({"onDelete": "retry"}, {"delete_fn": "retrying", "cleanup_fn": "succeeded"}),
    "retained": ({"onDelete": "fatal-retain"}, {"delete_fn": "retained", "cleanup_fn": "succeeded"}),
    "released": ({"onDelete": "fatal", "onCleanup": "pending"}, {"delete_fn": "failed", "cleanup_fn": "pending"}),
}
# Where example output for docs/observability.md is written, when asked.
DOCS_OUTPUT = os.environ.get("KOPF_OUTCOMES_DOCS_OUTPUT")


async def cli(cluster, *args: str, program: str = "kopf-outcomes") -> tuple[int, str]:
    env = dict(os.environ, KUBECONFIG=str(cluster.admin_kubeconfig), PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    command = [str(BIN / program)] if program != "kubectl" else ["kubectl"]
    process = await asyncio.create_subprocess_exec(*command, *args, env=env, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    return process.returncode or 0, (out + err).decode()


async def why(cluster, namespace: str, name: str, *options: str) -> dict:
    code, output = await cli(cluster, "why", f"kex/{name}", "-n", namespace, "-o", "json", *options)
    assert code == 0, output
    return dict(json.loads(output))


def states(report: dict) -> dict[str, str]:
    return {h["id"]: h["state"] for h in report["handlers"]}


@pytest.mark.parametrize("storage, prefix, options", [
    ("annotations", "kopf.zalando.org", ()),
    ("status", "kopf.zalando.org", ("--storage", "status")),
    ("annotations", "my-operator.example.com", ("--prefix", "my-operator.example.com")),
], ids=["annotations", "status", "prefix"])
async def test_why_and_stuck(cluster, objects, namespace, operator, storage, prefix, options):
    async with operator(OPERATOR, STORAGE=storage, PREFIX=prefix) as op:
        for name, (spec, _) in OBJECTS.items():
            await start_deleting(objects, namespace, name, spec)
            await asyncio.sleep(1.1)  # deletion times have a resolution of one second: a clear order

        reports = {}
        for name, (_, expected) in OBJECTS.items():
            async def settled(name: str = name, expected: dict = expected) -> dict | None:
                found = await why(cluster, namespace, name, *options)
                return found if states(found) == expected else None
            reports[name] = await eventually(settled, what=f"{name}: {expected}")
        await asyncio.sleep(1)  # the last patches are written: from now on all of them are parked

        # Pending: our memory says why; Kopf's progress says it will not run on a timer.
        pending = {h["id"]: h for h in reports["pending"]["handlers"]}["delete_fn"]
        assert (pending["memory"]["outcome"], pending["memory"]["reason"]) == \
               ("pending", "waiting for the external system")
        assert pending["progress"]["retries"] == 1 and pending["progress"]["delayed"] > "2030"
        assert pending["release"] is None
        assert reports["pending"]["finalizers"] == [{"name": FINALIZER, "operator": True, "retainedBy": []}]
        assert reports["pending"]["deletionTimestamp"] and reports["pending"]["waitingSeconds"] >= 0

        # Retrying: Kopf's progress only (a Retry is not remembered by default).
        retrying = {h["id"]: h for h in reports["retrying"]["handlers"]}["delete_fn"]
        assert retrying["memory"] is None
        assert (retrying["progress"]["retries"], retrying["progress"]["message"]) == \
               (1, "the external system is busy")

        # Retained on purpose: the finalizer says by whom, and the handler how to release it.
        release = await stamped(objects, namespace, "retained", "delete_fn")  # delete_fn@<its stamp>
        command = (f"kubectl annotate --overwrite kopfexamples.kopf.dev retained -n {namespace} "
                   f"outcomes.kopf.zalando.org/release={release}")
        retained = {h["id"]: h for h in reports["retained"]["handlers"]}["delete_fn"]
        assert retained["release"] == command
        assert reports["retained"]["finalizers"] == [{"name": FINALIZER, "operator": True,
                                                      "retainedBy": ["delete_fn"]}]

        # Released after a Fatal: failed, and the finalizer is held only by the other handler.
        released = {h["id"]: h for h in reports["released"]["handlers"]}
        assert released["delete_fn"]["progress"]["failure"] is True
        assert released["delete_fn"]["release"] is None
        assert released["cleanup_fn"]["memory"]["depends_on"] == ["status.deletion"]  # what wakes it
        since = datetime.datetime.fromisoformat(released["cleanup_fn"]["memory"]["since"])
        deleted = datetime.datetime.fromisoformat(reports["released"]["deletionTimestamp"].replace("Z", "+00:00"))
        assert deleted <= since <= datetime.datetime.now(datetime.timezone.utc)  # since it concluded so

        # Reading costs nothing: no write by anyone, no handler run.
        audit, runs = AuditLog(cluster.audit_log), len(op.records())
        mark = audit.mark()
        code, table = await cli(cluster, "why", "kex/retained", "-n", namespace, *options)
        assert code == 0, table
        code, stuck_json = await cli(cluster, "stuck", "kex", "-n", namespace, "-o", "json", *options)
        assert code == 0, stuck_json
        code, stuck_yaml = await cli(cluster, "stuck", "-n", namespace, "-o", "yaml", *options)
        assert code == 0, stuck_yaml
        code, stuck_table = await cli(cluster, "stuck", "-n", namespace, *options)
        assert code == 0, stuck_table
        await asyncio.sleep(1)
        assert audit.writes(since=mark, namespace=namespace) == []
        assert [r.message for r in op.records()[runs:] if r.message.startswith("Handler ")] == []

        # stuck: every deleting object, oldest first; the same in JSON, YAML and as a table.
        listed = json.loads(stuck_json)
        assert [r["name"] for r in listed] == list(OBJECTS)
        assert [states(r) for r in listed] == [expected for _, expected in OBJECTS.values()]
        assert [r["name"] for r in yaml.safe_load(stuck_yaml)] == list(OBJECTS)
        lines = stuck_table.splitlines()
        assert lines[0].split() == ["NAMESPACE", "OBJECT", "DELETING", "FOR", "FINALIZERS", "HANDLERS"]
        assert [line.split()[1] for line in lines[1:]] == [f"kopfexamples.kopf.dev/{n}" for n in OBJECTS]
        assert command in table and "retains the finalizer on purpose" in table
        code, released_table = await cli(cluster, "why", "kex/released", "-n", namespace, *options)
        assert "on a change of status.deletion" in released_table, released_table

        if prefix != "kopf.zalando.org":  # the prefix matters: without it Kopf's progress is not found
            assert {h["id"]: h["progress"] for h in (await why(cluster, namespace, "pending"))["handlers"]} == \
                   {"delete_fn": None}
        if storage == "annotations" and prefix == "kopf.zalando.org" and DOCS_OUTPUT:
            Path(DOCS_OUTPUT).mkdir(parents=True, exist_ok=True)
            for name in OBJECTS:
                Path(DOCS_OUTPUT, f"why-{name}.txt").write_text((await cli(
                    cluster, "why", f"kex/{name}", "-n", namespace))[1])
            Path(DOCS_OUTPUT, "stuck.txt").write_text(stuck_table)

        # The release command, run as it is shown, lets the retained object go.
        code, output = await cli(cluster, *shlex.split(command)[1:], "--kubeconfig", str(cluster.admin_kubeconfig),
                                 program="kubectl")
        assert code == 0, output
        await eventually(lambda: gone(objects, namespace, "retained"), what="the released object to go")
        code, output = await cli(cluster, "why", "kex/retained", "-n", namespace)
        assert code == 1 and "not found in namespace" in output and len(output.strip().splitlines()) == 1


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_kubectl_finds_the_plugin(cluster, objects, namespace, operator):
    async with operator(OPERATOR):
        await start_deleting(objects, namespace, "p", {"onDelete": "pending"})
        found = await eventually(lambda: why(cluster, namespace, "p"), what="p")

        async def parked() -> dict | None:
            code, output = await cli(cluster, "outcomes", "why", "kopfexamples/p", "-n", namespace, "-o", "json",
                                     program="kubectl")
            assert code == 0, output
            report = json.loads(output)
            return report if states(report).get("delete_fn") == "pending" else None
        report = await eventually(parked, what="kubectl outcomes why")
        assert report["name"] == found["name"] == "p"


async def test_bad_input_is_named(cluster, namespace):
    code, output = await cli(cluster, "why", "nonsense", "-n", namespace)
    assert code == 2 and "expected KIND/NAME" in output
    code, output = await cli(cluster, "why", "nokind/x", "-n", namespace)
    assert code == 1 and "no resource kind 'nokind'" in output
    code, output = await cli(cluster, "stuck", "-n", namespace, "-A")
    assert code == 2 and "exclude each other" in output
