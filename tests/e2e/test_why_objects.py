"""
``why`` names the objects a handler waits on, on the real API server (issue 44, finding 2): a
parent waiting for its Jobs, each with its source and tracked fields, and which changed since the
handler concluded (the memory keeps what it saw, not only a hash).
"""
from __future__ import annotations

from kubernetes_asyncio import client

from tests.e2e.conftest import eventually
from tests.e2e.test_memory import MERGE
from tests.e2e.test_outcomes import gone, start_deleting
from tests.e2e.test_why import cli, why

OPERATOR = "tests/e2e/operators/jobs_operator.py"


def job(name: str, parent: str) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {"example.com/parent": parent}},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "c", "image": "busybox"}]}}}}


async def test_why_lists_the_jobs_a_parent_waits_for_and_which_changed(api, cluster, objects, namespace, operator):
    batch = client.BatchV1Api(api)
    for name in ("job-1", "job-2"):
        await batch.create_namespaced_job(namespace, job(name, "parent"))
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "parent", {})
        await op.wait_for(lambda r: r.message == "Handler 'delete_fn' is pending: 2 jobs unfinished", what="Pending")

        async def remembered() -> dict | None:
            report = await why(cluster, namespace, "parent")
            [handler] = report["handlers"]
            return handler if handler.get("waitsOn") else None
        handler = await eventually(remembered, what="the memory of the Jobs")
        [source] = handler["waitsOn"]
        assert (source["how"], source["resource"], source["fields"]) == ("selected", "jobs.v1.batch",
                                                                          ["status.succeeded"])
        assert [(o["name"], o["now"], o["values"]) for o in source["objects"]] == [
            ("job-1", "unchanged", {"status.succeeded": None}), ("job-2", "unchanged", {"status.succeeded": None})]

        # One Job succeeds: the handler wakes, concludes as before (1 unfinished) and stores what it saw.
        await batch.patch_namespaced_job_status("job-1", namespace, {"status": {"succeeded": 1}},
                                                _content_type=MERGE)
        await op.wait_for(lambda r: r.message == "Handler 'delete_fn' is pending: 1 jobs unfinished",
                          what="the new conclusion")

        async def after() -> dict | None:
            [handler] = (await why(cluster, namespace, "parent"))["handlers"]
            states = {o["name"]: o["now"] for o in handler["waitsOn"][0]["objects"]}
            return handler if states == {"job-1": "unchanged", "job-2": "unchanged"} else None
        await eventually(after, what="the memory to name the Jobs as the handler last saw them")

    # The operator stopped: a change since the conclusion is shown as such.
    await batch.patch_namespaced_job_status("job-2", namespace, {"status": {"succeeded": 1}}, _content_type=MERGE)
    [handler] = (await why(cluster, namespace, "parent"))["handlers"]
    assert [(o["name"], o["now"]) for o in handler["waitsOn"][0]["objects"]] == [("job-1", "unchanged"),
                                                                                ("job-2", "changed")]
    await batch.delete_namespaced_job("job-1", namespace)
    code, table = await cli(cluster, "why", "kex/parent", "-n", namespace)
    assert code == 0, table
    assert "delete_fn waits on other objects" in table
    assert "  selected jobs.v1.batch, fields status.succeeded:" in table
    assert f"    {namespace}/job-1  gone" in table and f"    {namespace}/job-2  changed: status.succeeded=1" in table

    async with operator(OPERATOR):  # the last Job done: the parent goes
        await eventually(lambda: gone(objects, namespace, "parent"), what="the parent to go")
