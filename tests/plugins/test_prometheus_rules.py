"""
The deployment recipe's Prometheus alert rules (examples/deploy/prometheus): valid for promtool,
their unit tests pass, and they name only metrics that the Prometheus plugin really exports.

promtool comes with Debian's ``prometheus`` package, or a Go build (./scripts/test brings one);
without it these tests fail, saying so: a skipped check would pass for a checked one.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import yaml
from kopf_outcomes_prometheus.metrics import Metrics, WaitingCollector
from prometheus_client import CollectorRegistry

from tests.programs import program

RULES = Path(__file__).resolve().parents[2] / "examples" / "deploy" / "prometheus"


def promtool() -> str:
    return program("promtool")


def test_promtool_checks_the_rules() -> None:
    done = subprocess.run([promtool(), "check", "rules", "alerts.yaml"], cwd=RULES, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 4 rules found" in done.stdout


def test_the_rules_unit_tests_pass() -> None:
    done = subprocess.run([promtool(), "test", "rules", "alerts_test.yaml"], cwd=RULES, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_a_broken_rule_fails_the_unit_tests(tmp_path: Path) -> None:
    """The unit tests can fail: with the threshold of one rule changed, they do."""
    (tmp_path / "alerts.yaml").write_text((RULES / "alerts.yaml").read_text().replace("for: 1h", "for: 2h"))
    shutil.copy(RULES / "alerts_test.yaml", tmp_path)
    done = subprocess.run([promtool(), "test", "rules", "alerts_test.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0
    assert "KopfOutcomesPendingTooLong" in done.stdout + done.stderr


def exported() -> set[str]:
    """The names of the series the plugin exports: its families, each with a sample."""
    registry = CollectorRegistry()
    metrics = Metrics(registry, waiting=None)
    metrics.outcomes.labels("r", "h", "retry", "error").inc()
    metrics.plugin_failures.labels("p").inc()
    metrics.wait.labels("r", "h", "delete").observe(1)
    return {sample.name for family in registry.collect() for sample in family.samples} | {WaitingCollector.NAME}


def test_the_rules_name_only_metrics_the_plugin_exports() -> None:
    groups = yaml.safe_load((RULES / "alerts.yaml").read_text())["groups"]
    used = {name for group in groups for rule in group["rules"]
            for name in re.findall(r"\bkopf_outcomes_[a-z_]+", rule["expr"])}
    assert used == {"kopf_outcomes_handlers_waiting", "kopf_outcomes_plugin_failures_total",
                    "kopf_outcomes_handler_outcomes_total"}
    assert used <= exported()
