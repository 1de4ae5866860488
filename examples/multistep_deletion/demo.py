"""
The seed story, told twice on the local control plane: stock Kopf polling with TemporaryError,
then kopf-outcomes with Pending and wake-on-change. Prints both timelines side by side.

    ./scripts/demo        (or: python -m examples.multistep_deletion.demo)
"""
from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

from kubernetes_asyncio import client, config, watch

from examples.multistep_deletion.external_system import ExternalSystem
from kopf_outcomes_testing.cluster import ClusterInfo, ensure_running
from kopf_outcomes_testing.cluster.audit import AuditLog
from kopf_outcomes_testing.namespaces import create_namespace, delete_namespace
from kopf_outcomes_testing.process import OperatorProcess

ROOT = Path(__file__).resolve().parents[2]
CALLBACK_AFTER = 6.0  # seconds the external system works before calling back
STOCK_POLL_DELAY = "5"
NAME = "seed"


@dataclasses.dataclass
class Story:
    title: str
    lines: list[str]
    total: float
    callback_to_gone: float
    errors: int
    writes: int  # to the object (its patches), without Events
    events: int  # Events created or updated
    runs: int


async def tell(info: ClusterInfo, api: client.ApiClient, title: str, operator: str) -> Story:
    namespace = create_namespace(info.admin_client(), prefix="demo-")
    objects = client.CustomObjectsApi(api)
    system = ExternalSystem(kubeconfig=str(info.admin_kubeconfig), delay=CALLBACK_AFTER, via="status")
    runner, url = await system.serve()
    audit = AuditLog(info.audit_log)
    try:
        op = OperatorProcess(operator, namespace, kubeconfig=str(info.admin_kubeconfig), cwd=ROOT,
                             env={"EXTERNAL_SYSTEM_URL": url, "STOCK_POLL_DELAY": STOCK_POLL_DELAY,
                                  # the story without plugins, whatever is installed here
                                  "KOPF_OUTCOMES_PLUGINS": ""})
        async with op:
            await objects.create_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", {
                "apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": NAME}, "spec": {}})
            await op.wait_for(lambda r: r.message.startswith("Handling cycle is finished"), what="the finalizer")
            mark, started = audit.mark(), time.time()
            await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", NAME)
            await _until_gone(objects, namespace)
            total = time.time() - started
            await asyncio.sleep(0.5)
            records = op.records(f"{namespace}/{NAME}")
        called_back = time.time() - (time.monotonic() - system.callbacks[(namespace, NAME)])
        shown = [r for r in records if r.time >= started and (r.level != "DEBUG" or "invoked" in r.message
                 or "Patching" in r.message or "patching" in r.message)]
        lines = [f"{r.time - started:6.2f}s  {r.level:<7}  {_short(r.message)}" for r in shown]
        lines.insert(sum(1 for r in shown if r.time < called_back),
                     f"{called_back - started:6.2f}s  -------  the external system calls back")
        writes = audit.writes(since=mark, user_agent="kopf", namespace=namespace)
        events = [write for write in writes if write.resource == "events"]
        return Story(title=title, lines=lines, total=total, callback_to_gone=started + total - called_back,
                     errors=sum(1 for r in shown if r.level == "ERROR"), writes=len(writes) - len(events),
                     events=len(events),
                     runs=sum(1 for r in shown if "is invoked" in r.message))
    finally:
        await runner.cleanup()
        delete_namespace(info.admin_client(), namespace)


async def _until_gone(objects: client.CustomObjectsApi, namespace: str) -> None:
    async with watch.Watch() as stream:
        async for event in stream.stream(objects.list_namespaced_custom_object, "kopf.dev", "v1",
                                         namespace, "kopfexamples", timeout_seconds=120):
            if event["type"] == "DELETED":
                return
    raise RuntimeError("the object was not deleted within 120 s; see the timeline above")


def _short(message: str) -> str:
    return message if len(message) <= 110 else message[:107] + "..."


async def main() -> None:
    info = ensure_running()
    api = await config.new_client_from_config(config_file=str(info.admin_kubeconfig))
    async with api:
        stock = await tell(info, api, f"Stock Kopf: TemporaryError(delay={STOCK_POLL_DELAY}) polling",
                           "examples/multistep_deletion/stock_example.py")
        ours = await tell(info, api, "kopf-outcomes: Pending, woken by the callback",
                          "examples/multistep_deletion/example.py")
    for story in (stock, ours):
        print(f"\n=== {story.title} ===")
        print("\n".join(story.lines))
    print(f"\n{'':32}{'stock Kopf':>14}{'kopf-outcomes':>16}")
    for label, a, b in [
        ("delete → gone (s)", f"{stock.total:.2f}", f"{ours.total:.2f}"),
        ("callback → gone (s)", f"{stock.callback_to_gone:.2f}", f"{ours.callback_to_gone:.2f}"),
        ("handler runs", stock.runs, ours.runs),
        ("log records at ERROR", stock.errors, ours.errors),
        ("API writes to the object", stock.writes, ours.writes),
        ("Events posted or updated", stock.events, ours.events),
    ]:
        print(f"{label:<32}{a:>14}{b:>16}")
    print("\nAPI writes are counted by the API server's audit log, not by the operator.")


if __name__ == "__main__":
    asyncio.run(main())
