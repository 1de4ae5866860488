"""Once per state on the real API server (the status a subresource: Kopf's own write of it is a
PATCH of its own): the handler's own writes keep its key; a release answers one retention."""
from __future__ import annotations

import asyncio
import re

from kopf_outcomes.memory import RELEASE_ANNOTATION
from tests.e2e.conftest import eventually, get_example
from tests.e2e.releases import stamped
from tests.e2e.test_outcomes import finalized, gone, start_deleting

OPERATOR = "tests/e2e/operators/once_operator.py"
MERGE = "application/merge-patch+json"
RUN = re.compile(r"run (\d+): acted=(True|False) key=(\w+)")


async def annotate(objects, namespace: str, name: str, value: str | None) -> None:
    await objects.patch_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", name,
                                                 {"metadata": {"annotations": {RELEASE_ANNOTATION: value}}},
                                                 _content_type=MERGE)


async def annotations(objects, namespace: str, name: str) -> dict[str, str]:
    body = await get_example(objects, namespace, name)
    return (body or {}).get("metadata", {}).get("annotations") or {}


async def test_the_handlers_own_status_writes_and_a_retry_keep_its_key(objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "w", {"mode": "writer"})
        await op.wait_for(lambda r: r.message.startswith("run 4:"), what="four runs", timeout=30)
        seen = [RUN.match(r.message).groups() for r in op.records(f"{namespace}/w") if RUN.match(r.message)]
        assert [(run, acted) for run, acted, _ in seen[:4]] == [
            ("1", "False"), ("2", "True"), ("3", "True"), ("4", "True")], seen
        assert len({key for _, _, key in seen}) == 1, seen  # its own writes, and a Retry, kept it
        async def landed() -> bool:  # run 4 logs before Kopf's PATCH of its write
            body = await get_example(objects, namespace, "w")
            return (body or {}).get("status", {}).get("deletion", {}).get("run", 0) >= 4
        await eventually(landed, what="the fourth run's write, in the status subresource")


async def test_a_release_answers_one_retention(objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "r", {"mode": "retained"})
        await op.wait_for(lambda r: "Handler 'a_fn' failed permanently" in r.message, what="a_fn retained")
        await op.wait_for(lambda r: "Handler 'b_fn' is pending" in r.message, what="b_fn waiting")
        await annotate(objects, namespace, "r", await stamped(objects, namespace, "r", "a_fn"))  # retained now
        await op.wait_for(lambda r: "Handler 'a_fn' is released" in r.message, what="a_fn released")
        async def consumed() -> bool:
            return RELEASE_ANNOTATION not in await annotations(objects, namespace, "r")
        await eventually(consumed, what="the release removed in the releasing PATCH")

        await objects.patch_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", "r",
                                                     {"spec": {"go": True}}, _content_type=MERGE)
        await op.wait_for(lambda r: "Handler 'b_fn' failed permanently" in r.message, what="b_fn retained")
        await asyncio.sleep(2)  # events of the retention's own write come and go
        assert await finalized(objects, namespace, "r")  # the release answered a_fn's retention only

        await annotate(objects, namespace, "r", "b_fn")  # the old form: no stamp of b_fn's retention
        error = await op.wait_for(lambda r: r.level == "ERROR" and "does not release" in r.message, what="held")
        assert f"{RELEASE_ANNOTATION}=b_fn@" in error.message  # it says the value that releases it
        await asyncio.sleep(1)
        assert await finalized(objects, namespace, "r")
        await annotate(objects, namespace, "r", await stamped(objects, namespace, "r", "b_fn"))
        await eventually(lambda: gone(objects, namespace, "r"), what="the object to go")


async def test_a_leftover_release_is_ignored_and_said_so(objects, namespace, operator):
    async with operator(OPERATOR) as op:
        await start_deleting(objects, namespace, "l", {"mode": "retained"})
        await op.wait_for(lambda r: "Handler 'b_fn' is pending" in r.message, what="b_fn waiting")
        await annotate(objects, namespace, "l", "b_fn")  # before b_fn is retained: answers nothing of it
        await objects.patch_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", "l",
                                                     {"spec": {"go": True}}, _content_type=MERGE)
        await op.wait_for(lambda r: "Ignored the release annotation" in r.message and "b_fn" in r.message,
                          what="the leftover ignored")
        await asyncio.sleep(2)
        assert await finalized(objects, namespace, "l")
        assert RELEASE_ANNOTATION not in await annotations(objects, namespace, "l")


PRUNED = "tests/e2e/operators/pruned_operator.py"


def pruning_crd() -> dict:
    """``prunedexamples``: its status schema keeps Kopf's ``status.kopf`` and nothing else of the status."""
    from tests.e2e.crds import crd
    body = crd("prunedexamples", "PrunedExample")
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"] = {
        "type": "object", "properties": {"kopf": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    return body


async def test_an_own_status_write_the_api_server_prunes_starts_nothing_again(api, objects, namespace, operator):
    """The handler's own ``status.deletion`` is pruned (not in the CRD's schema), its memory lands: the
    events that follow are no change of the state it acted on, so it stays parked (one run, one start);
    a person's change of the spec is a state it did not act on (another key)."""
    from tests.e2e.crds import ensure
    from tests.e2e.test_outcomes import FINALIZER
    await ensure(api, pruning_crd())

    async def body() -> dict | None:
        try:
            return await objects.get_namespaced_custom_object("kopf.dev", "v1", namespace, "prunedexamples", "p")
        except Exception as e:  # noqa: BLE001 - the object's absence is an ApiException 404
            if getattr(e, "status", None) == 404:
                return None
            raise

    async with operator(PRUNED) as op:
        await objects.create_namespaced_custom_object("kopf.dev", "v1", namespace, "prunedexamples", {
            "apiVersion": "kopf.dev/v1", "kind": "PrunedExample", "metadata": {"name": "p"}, "spec": {}})

        async def finalizer() -> bool:
            found = await body()
            return found is not None and FINALIZER in (found["metadata"].get("finalizers") or [])

        await eventually(finalizer, what="the finalizer")
        await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "prunedexamples", "p")
        await op.wait_for(lambda r: "Handler 'deletion_fn' is pending" in r.message, what="the first run parked")
        await asyncio.sleep(3)  # the events of its own PATCHes come and go
        found = await body()
        assert found is not None and "deletion" not in (found.get("status") or {})  # pruned
        seen = [RUN.match(r.message).groups() for r in op.records(f"{namespace}/p") if RUN.match(r.message)]
        assert [(run, acted) for run, acted, _ in seen] == [("1", "False")], seen
        await objects.patch_namespaced_custom_object("kopf.dev", "v1", namespace, "prunedexamples", "p",
                                                     {"spec": {"go": True}}, _content_type=MERGE)
        await eventually(lambda: _absent(body), what="the object to go")
        seen = [RUN.match(r.message).groups() for r in op.records(f"{namespace}/p") if RUN.match(r.message)]
        assert [(run, acted) for run, acted, _ in seen] == [("1", "False"), ("2", "False")], seen
        assert seen[0][2] != seen[1][2]


async def _absent(read) -> bool:
    return await read() is None
