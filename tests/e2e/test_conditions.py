"""
The conditions plugin on the real API server, read by the real ``kubectl``: the API conventions
(types, reasons, status, observedGeneration, lastTransitionTime), ``kubectl wait`` on the summary,
and the retained finalizer released with the exact command its message gives.
"""
from __future__ import annotations

import asyncio
import re
import shlex
import shutil

import pytest

from kopf_outcomes_testing.cluster.audit import AuditLog
from tests.e2e.conftest import create_example, eventually, get_example
from tests.e2e.releases import stamped
from tests.e2e.test_outcomes import gone, start_deleting

# The API server's refusal as a log line names it: 422 alone, not inside a number such as a
# sleep's "299.927422 seconds left" (which once failed this test).
_HTTP_422 = re.compile(r"(?<![\d.])422(?![\d.])")

OPERATOR = "tests/e2e/operators/conditions_operator.py"
PLUGINS = {"KOPF_OUTCOMES_PLUGINS": "conditions"}

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


async def kubectl(cluster, *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(cluster.admin_kubeconfig), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    output, _ = await process.communicate()
    return process.returncode or 0, output.decode()


async def conditions(objects, namespace: str, name: str) -> dict[str, dict]:
    body = await get_example(objects, namespace, name)
    return {c["type"]: c for c in ((body or {}).get("status") or {}).get("conditions") or []}


async def condition(objects, namespace: str, name: str, kind: str, reason: str) -> dict | None:
    found = (await conditions(objects, namespace, name)).get(kind)
    return found if found is not None and found["reason"] == reason else None


async def test_kubectl_waits_for_the_summary_of_a_succeeded_object(cluster, objects, namespace, operator):
    async with operator(OPERATOR, **PLUGINS):
        await create_example(objects, namespace, "s")
        code, output = await kubectl(cluster, "wait", "--for=condition=HandlersSucceeded", "--timeout=30s",
                                     "-n", namespace, "kopfexamples.kopf.dev/s")
        assert code == 0, output
        assert "condition met" in output
        written = await conditions(objects, namespace, "s")
        assert set(written) == {"CreateFnSucceeded", "HandlersSucceeded"}
        for kind in written:
            stamp = written[kind].pop("lastTransitionTime")
            assert stamp.endswith("Z") and "T" in stamp
        assert written["CreateFnSucceeded"] == {
            "type": "CreateFnSucceeded", "status": "True", "reason": "Succeeded",
            "message": "Handler 'create_fn' succeeded.", "observedGeneration": 1}
        assert written["HandlersSucceeded"] == {
            "type": "HandlersSucceeded", "status": "True", "reason": "Succeeded",
            "message": "All handlers succeeded.", "observedGeneration": 1}


async def test_pending_then_success_moves_the_transition_time_only_with_the_status(
        cluster, objects, namespace, operator):
    audit = AuditLog(cluster.audit_log)
    async with operator(OPERATOR, **PLUGINS) as op:
        await create_example(objects, namespace, "p", {"onCreate": "pending"})
        first = await eventually(lambda: condition(objects, namespace, "p", "CreateFnSucceeded", "Pending"),
                                 what="the Pending condition")
        assert (first["status"], first["observedGeneration"]) == ("False", 1)
        assert first["message"] == ("Handler 'create_fn' is pending: waiting for the external system. "
                                    "It runs again when the object changes.")
        summary = (await conditions(objects, namespace, "p"))["HandlersSucceeded"]
        assert (summary["status"], summary["reason"]) == ("False", "Pending")
        assert summary["message"] == f"Waiting for 1 handler(s): CreateFn. CreateFnSucceeded: {first['message']}"
        code, output = await kubectl(cluster, "wait", "--for=condition=HandlersSucceeded", "--timeout=2s",
                                     "-n", namespace, "kopfexamples.kopf.dev/p")
        assert code != 0 and "timed out" in output

        # Parked: its conditions cost no write.
        await asyncio.sleep(1)
        mark = audit.mark()
        await asyncio.sleep(2)
        assert audit.writes(since=mark, user_agent="kopf", namespace=namespace, name="p") == []

        # A change that leaves it pending: a new generation observed, the same transition time.
        await objects.patch_namespaced_custom_object(
            "kopf.dev", "v1", namespace, "kopfexamples", "p", {"spec": {"other": 1}},
            _content_type="application/merge-patch+json")

        async def observed(generation: int) -> dict | None:
            found = await condition(objects, namespace, "p", "CreateFnSucceeded", "Pending")
            return found if found is not None and found["observedGeneration"] == generation else None
        second = await eventually(lambda: observed(2), what="generation 2 observed")
        assert second["lastTransitionTime"] == first["lastTransitionTime"]
        assert second["status"] == "False"

        # Success: the status changes, and so does the transition time.
        await asyncio.sleep(1.1)  # the times have a resolution of one second
        await objects.patch_namespaced_custom_object(
            "kopf.dev", "v1", namespace, "kopfexamples", "p", {"spec": {"onCreate": "success"}},
            _content_type="application/merge-patch+json")
        code, output = await kubectl(cluster, "wait", "--for=condition=HandlersSucceeded", "--timeout=30s",
                                     "-n", namespace, "kopfexamples.kopf.dev/p")
        assert code == 0, output
        third = (await conditions(objects, namespace, "p"))["CreateFnSucceeded"]
        assert (third["status"], third["reason"], third["observedGeneration"]) == ("True", "Succeeded", 3)
        assert third["lastTransitionTime"] > first["lastTransitionTime"]
        assert not [r for r in op.records() if r.level == "ERROR"]


async def test_a_retained_finalizer_says_how_to_release_it_and_that_command_works(
        cluster, objects, namespace, operator):
    async with operator(OPERATOR, **PLUGINS):
        await start_deleting(objects, namespace, "f", {"onDelete": "fatal-retain"})
        retained = await eventually(
            lambda: condition(objects, namespace, "f", "DeleteFnSucceeded", "FinalizerRetained"),
            what="the retained condition")
        release = await stamped(objects, namespace, "f", "delete_fn")  # delete_fn@<its stamp>
        command = (f"kubectl annotate --overwrite kopfexamples.kopf.dev f -n {namespace} "
                   f"outcomes.kopf.zalando.org/release={release}")
        assert retained["status"] == "False"
        assert retained["message"] == (
            "Handler 'delete_fn' failed permanently: the external system lost the record. The finalizer is "
            f"retained until a person releases it, after fixing the cause: {command}")
        summary = (await conditions(objects, namespace, "f"))["HandlersSucceeded"]
        assert (summary["status"], summary["reason"]) == ("False", "FinalizerRetained")

        # A person runs the command from the message, as it is.
        code, output = await kubectl(cluster, *shlex.split(retained["message"].rsplit(": ", 1)[1])[1:])
        assert code == 0, output
        await eventually(lambda: gone(objects, namespace, "f"), what="the object to go")


async def test_a_40000_character_reason_fits_the_standard_condition_schema(api, objects, namespace, operator):
    """Issue 34, finding 5: the API server rejected the whole status PATCH, Kopf's progress included."""
    from tests.e2e.crds import crd, ensure
    await ensure(api, crd("conditionedexamples", "ConditionedExample", conditions=True))
    async with operator("tests/e2e/operators/conditioned_operator.py", **PLUGINS) as op:
        await objects.create_namespaced_custom_object("kopf.dev", "v1", namespace, "conditionedexamples", {
            "apiVersion": "kopf.dev/v1", "kind": "ConditionedExample", "metadata": {"name": "long"},
            "spec": {"reasonLength": 40_000}})

        async def recorded() -> dict | None:
            body = await objects.get_namespaced_custom_object("kopf.dev", "v1", namespace, "conditionedexamples",
                                                              "long")
            progress = (body.get("metadata", {}).get("annotations") or {}).get("kopf.zalando.org/create_fn")
            kinds = [c["type"] for c in body.get("status", {}).get("conditions") or []]
            return body if progress and len(kinds) == 3 else None

        body = await eventually(recorded, timeout=20, what="Kopf's progress and the conditions")
        assert '"retries":1' in body["metadata"]["annotations"]["kopf.zalando.org/create_fn"].replace(" ", "")
        written = {c["type"]: c for c in body["status"]["conditions"]}
        assert written["CreateFnSucceeded"]["reason"] == "Retrying"
        assert written["CreateFnSucceeded"]["message"].endswith(" [truncated]")
        assert len(written["CreateFnSucceeded"]["message"]) == 32768
        assert written["HandlersSucceeded"]["status"] == "False"
        long_type = next(kind for kind in written if kind.startswith("AHandlerWhoseId"))
        assert len(long_type) <= 63 and written[long_type]["status"] == "True"
        assert not [r for r in op.records() if _HTTP_422.search(r.message) or "Unprocessable" in r.message]


async def _summaries(objects, namespace: str, name: str, kind: str, seen: list[dict], stop: asyncio.Event) -> None:
    """Every state of the object's summary that the API server stored, in order (a watch sees each)."""
    from kubernetes_asyncio import watch
    stream = watch.Watch()
    async for event in stream.stream(objects.list_namespaced_custom_object, "kopf.dev", "v1", namespace,
                                     "conditionedexamples", field_selector=f"metadata.name={name}",
                                     timeout_seconds=60):
        body = event["object"]
        found = {c["type"]: c for c in (body.get("status") or {}).get("conditions") or []}
        seen.append({"summary": found.get(kind), "types": sorted(found)})
        if stop.is_set():
            break


async def test_the_summary_is_not_true_before_both_create_handlers_ran(cluster, api, objects, namespace, operator):
    """Issue 44, finding 6: after the first of two create handlers, the summary turned True (Kopf
    runs one handler per cycle), and ``kubectl wait`` returned before the second had run."""
    from tests.e2e.crds import crd, ensure
    await ensure(api, crd("conditionedexamples", "ConditionedExample", conditions=True))
    seen: list[dict] = []
    stop = asyncio.Event()
    watching = asyncio.create_task(_summaries(objects, namespace, "two", "HandlersSucceeded", seen, stop))
    await asyncio.sleep(0.5)  # the watch is open before the object exists
    async with operator("tests/e2e/operators/two_creates_operator.py", **PLUGINS) as op:
        await objects.create_namespaced_custom_object("kopf.dev", "v1", namespace, "conditionedexamples", {
            "apiVersion": "kopf.dev/v1", "kind": "ConditionedExample", "metadata": {"name": "two"}, "spec": {}})
        await eventually(lambda: _condition_of(objects, namespace, "two", "SecondFnSucceeded", "Pending"),
                         what="the second handler pending")
        code, output = await kubectl(cluster, "wait", "--for=condition=HandlersSucceeded", "--timeout=2s",
                                     "-n", namespace, "conditionedexamples.kopf.dev/two")
        assert code != 0 and "timed out" in output
        await objects.patch_namespaced_custom_object(
            "kopf.dev", "v1", namespace, "conditionedexamples", "two", {"metadata": {"labels": {"second": "done"}}},
            _content_type="application/merge-patch+json")
        code, output = await kubectl(cluster, "wait", "--for=condition=HandlersSucceeded", "--timeout=30s",
                                     "-n", namespace, "conditionedexamples.kopf.dev/two")
        assert code == 0, output
        stop.set()
        await objects.patch_namespaced_custom_object(  # one more event, so that the watch sees the stop
            "kopf.dev", "v1", namespace, "conditionedexamples", "two", {"metadata": {"labels": {"seen": "all"}}},
            _content_type="application/merge-patch+json")
        await asyncio.wait_for(watching, timeout=30)
        assert not [r for r in op.records() if r.level == "ERROR"]
    trues = [index for index, state in enumerate(seen) if (state["summary"] or {}).get("status") == "True"]
    assert trues, seen
    first_true = seen[trues[0]]
    assert "SecondFnSucceeded" in first_true["types"]
    assert all((state["summary"] or {}).get("status") != "True" for state in seen[:trues[0]])
    second = [s for s in seen[:trues[0]] if "SecondFnSucceeded" in s["types"]]
    assert second, "the second handler's condition is written before the summary turns True"


async def _condition_of(objects, namespace: str, name: str, kind: str, reason: str) -> dict | None:
    body = await objects.get_namespaced_custom_object("kopf.dev", "v1", namespace, "conditionedexamples", name)
    found = {c["type"]: c for c in (body.get("status") or {}).get("conditions") or []}.get(kind)
    return found if found is not None and found["reason"] == reason else None


async def test_types_under_the_longest_finalizer_prefix_are_accepted_by_the_api_server(
        api, objects, namespace, operator):
    """Issue 44, finding 7: a 253-character prefix and a 63-character name made a 317-character
    type; the API server (maxLength 316) rejected the whole status PATCH, Kopf's progress included."""
    from tests.e2e.crds import crd, ensure
    await ensure(api, crd("conditionedexamples", "ConditionedExample", conditions=True))
    domain = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 59])
    finalizer = f"{domain}/x"  # a valid finalizer: its prefix as a type's prefix is 253 characters
    async with operator("tests/e2e/operators/two_creates_operator.py", CONDITIONS_FINALIZER=finalizer,
                        **PLUGINS) as op:
        await objects.create_namespaced_custom_object("kopf.dev", "v1", namespace, "conditionedexamples", {
            "apiVersion": "kopf.dev/v1", "kind": "ConditionedExample",
            "metadata": {"name": "long-prefix", "labels": {"second": "done"}}, "spec": {}})

        async def all_written() -> list[str] | None:
            body = await objects.get_namespaced_custom_object("kopf.dev", "v1", namespace, "conditionedexamples",
                                                              "long-prefix")
            kinds = [c["type"] for c in (body.get("status") or {}).get("conditions") or []]
            return kinds if len(kinds) == 4 else None

        kinds = await eventually(all_written, timeout=30, what="four conditions")
        assert max(len(kind) for kind in kinds) == 316
        assert not [r for r in op.records() if _HTTP_422.search(r.message) or "Unprocessable" in r.message]


@pytest.mark.parametrize("foreign", [["Ready"], {"Ready": "True"}], ids=["strings", "a-map"])
async def test_a_deletion_completes_despite_another_tools_shape_of_conditions(objects, namespace, operator, foreign):
    """Issue 41, finding 5: the plugin raised on ``["Ready"]`` or a map written by another tool, and
    every run of every handler, deletion included, became a plugin-failure retry that never ended."""
    async with operator(OPERATOR, **PLUGINS) as op:
        await create_example(objects, namespace, "foreign")
        await eventually(lambda: condition(objects, namespace, "foreign", "CreateFnSucceeded", "Succeeded"),
                         what="the create handler's condition")
        await objects.patch_namespaced_custom_object_status(  # another tool's status.conditions, whole
            "kopf.dev", "v1", namespace, "kopfexamples", "foreign", {"status": {"conditions": foreign}},
            _content_type="application/merge-patch+json")
        await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", "foreign")
        await eventually(lambda: gone(objects, namespace, "foreign"), timeout=30, what="the object to go")
        assert not [r for r in op.records() if r.level == "ERROR"]
        warned = [r for r in op.records() if r.level == "WARNING" and "conditions plugin ignores" in r.message]
        assert len(warned) == 1
