"""
A real Prometheus (Debian's ``prometheus``, on 127.0.0.1 only, for a bounded time) scrapes the
plugin's ``/metrics`` of two operators on the real API server, and evaluates the deployment
recipe's alert rules (examples/deploy/prometheus/alerts.yaml) against what it scraped.

Without the ``prometheus`` binary this test fails, saying so (./scripts/test brings it).
"""
from __future__ import annotations

import asyncio
import json
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tests.e2e.conftest import ROOT, eventually, get_example
from tests.e2e.test_prometheus import free_port
from tests.programs import program

OPERATOR = "tests/e2e/operators/alerting_operator.py"
RULES = ROOT / "examples" / "deploy" / "prometheus" / "alerts.yaml"
WITHIN = 60  # seconds: the bound on the whole wait for the alerts


def prometheus_binary() -> str:
    return program("prometheus")


async def has_finalizer(objects: Any, namespace: str, name: str, role: str) -> bool:
    body = await get_example(objects, namespace, name)
    return body is not None and f"{role}.alerting.example.com/finalizer" in (body["metadata"].get("finalizers") or [])


def config(targets: list[int]) -> str:
    return json.dumps({  # YAML is a superset of JSON
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [{"job_name": "kopf-outcomes",
                            "static_configs": [{"targets": [f"127.0.0.1:{port}" for port in targets]}]}],
    })


def api(port: int, path: str, **params: str) -> Any:
    url = f"http://127.0.0.1:{port}/api/v1/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    with urllib.request.urlopen(url, timeout=5) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    return body["data"]


async def test_a_real_prometheus_scrapes_the_plugin_and_the_alert_rules_evaluate(objects, namespace, operator,
                                                                                 tmp_path: Path):
    binary = prometheus_binary()
    plain, broken, web = free_port(), free_port(), free_port()
    (tmp_path / "prometheus.yml").write_text(config([plain, broken]))
    log = (tmp_path / "prometheus.log").open("w")
    prometheus = subprocess.Popen(
        [binary, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{web}", "--storage.tsdb.retention.time=1h"],
        stdout=subprocess.DEVNULL, stderr=log)
    try:
        async with operator(OPERATOR, ALERTING_ROLE="a", KOPF_OUTCOMES_PLUGINS="prometheus",
                            KOPF_OUTCOMES_PROMETHEUS_ADDRESS=f"127.0.0.1:{plain}") as op_a, \
                operator(OPERATOR, ALERTING_ROLE="b", KOPF_OUTCOMES_PLUGINS="prometheus,broken",
                         KOPF_OUTCOMES_PROMETHEUS_ADDRESS=f"127.0.0.1:{broken}") as op_b:
            for name, role, mode in (("waits", "a", "pending"), ("kept", "a", "fatal-retain"),
                                     ("errs", "a", "error"), ("plugged", "b", "success")):
                body = {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "spec": {"onDelete": mode},
                        "metadata": {"name": name, "labels": {"role": role}}}
                await objects.create_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", body)
                await eventually(lambda name=name, role=role: has_finalizer(objects, namespace, name, role),
                                 what=f"{name}'s finalizer")
                await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", name)

            expected = {("KopfOutcomesPendingTooLong", "pending"), ("KopfOutcomesFinalizerRetained", "pending"),
                        ("KopfOutcomesRetriesAtError", "pending"), ("KopfOutcomesPluginFailures", "firing")}

            async def alerts() -> set[tuple[str, str]] | None:
                try:
                    found = await asyncio.to_thread(api, web, "alerts")
                except OSError:
                    return None  # not up yet
                states = {(a["labels"]["alertname"], a["state"]) for a in found["alerts"]}
                return states if expected <= states else None

            try:
                states = await eventually(alerts, timeout=WITHIN, interval=1, what="the alerts")
            except AssertionError:
                print("\n".join(f"{r.level} {r.object} {r.message[:200]}" for r in op_a.records() + op_b.records()
                                if r.object is not None)[-6000:])
                print(await asyncio.to_thread(api, web, "alerts"))
                print(await asyncio.to_thread(api, web, "query", query='{__name__=~"kopf_outcomes_.*"}'))
                raise
            waiting = await asyncio.to_thread(api, web, "query", query="kopf_outcomes_handlers_waiting")
            targets = await asyncio.to_thread(api, web, "targets")
    finally:
        prometheus.terminate()
        prometheus.wait(timeout=30)
        log.close()

    assert states == expected  # and no other alert
    scraped = {(s["metric"]["state"], s["metric"]["instance"]): float(s["value"][1]) for s in waiting["result"]}
    assert scraped[("pending", f"127.0.0.1:{plain}")] == 1
    assert scraped[("retained", f"127.0.0.1:{plain}")] == 1
    assert {t["health"] for t in targets["activeTargets"]} == {"up"}
