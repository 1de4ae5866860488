"""
Events per object for a handler that fails temporarily every ``--interval`` seconds for
``--duration`` seconds: stock Kopf (``TemporaryError``, log lines posted as Events: "posting on")
beside kopf-outcomes (``Retry``, outcome Events as series), both at once, each operator in a
namespace of its own, on the local control plane. Counted at the API server: the Event objects
of the one deleting object, their summed ``count``, and the Event writes in the audit log.

    .venv/bin/python -m benchmarks.event_series --interval 5 --duration 300
"""
from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from kubernetes_asyncio import client, config

from examples.multistep_deletion.demo import ROOT
from kopf_outcomes_testing import OperatorProcess
from kopf_outcomes_testing.cluster import ensure_running
from kopf_outcomes_testing.cluster.audit import AuditLog
from kopf_outcomes_testing.namespaces import create_namespace, delete_namespace

OPERATOR = ROOT / "tests" / "e2e" / "operators" / "events_operator.py"


async def measure(interval: float, duration: float) -> dict[str, Any]:
    info = ensure_running()
    audit = AuditLog(info.audit_log)
    api = await config.new_client_from_config(config_file=str(info.admin_kubeconfig))
    spaces = {kind: create_namespace(info.admin_client(), prefix=f"events-{kind}-") for kind in ("stock", "ours")}
    mark = audit.mark()
    try:
        async with api:
            objects = client.CustomObjectsApi(api)
            stock = OperatorProcess(OPERATOR, spaces["stock"], kubeconfig=str(info.admin_kubeconfig), cwd=ROOT,
                                    env={"INSTALL_KOPF_OUTCOMES": "0"})
            ours = OperatorProcess(OPERATOR, spaces["ours"], kubeconfig=str(info.admin_kubeconfig), cwd=ROOT, env={})
            async with stock, ours:
                for namespace in spaces.values():
                    await objects.create_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", {
                        "apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "busy"},
                        "spec": {"delay": interval}})
                await asyncio.sleep(3)  # the finalizers
                for namespace in spaces.values():
                    await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", "busy")
                started = time.monotonic()
                await asyncio.sleep(duration)
                runs = {kind: sum(1 for r in op.records() if r.message == "Handler 'delete_fn' is invoked.")
                        for kind, op in (("stock", stock), ("ours", ours))}
            await asyncio.sleep(3)  # Kopf posts in the background
            result: dict[str, Any] = {"interval_s": interval, "duration_s": round(time.monotonic() - started, 1)}
            for kind, namespace in spaces.items():
                listing = await client.CoreV1Api(api).list_namespaced_event(
                    namespace, field_selector="involvedObject.name=busy")
                events = [e for e in listing.items if "delete_fn" in (e.message or "")]
                writes = [w for w in audit.writes(since=mark, user_agent="kopf", namespace=namespace)
                          if w.resource == "events"]
                result[kind] = {"handler_runs": runs[kind], "event_objects": len(events),
                                "events_counted": sum(e.count or 1 for e in events), "event_writes": len(writes)}
            return result
    finally:
        for namespace in spaces.values():
            delete_namespace(info.admin_client(), namespace)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--interval", type=float, default=5)
    parser.add_argument("--duration", type=float, default=300)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.interval, args.duration)), indent=2))


if __name__ == "__main__":
    main()
