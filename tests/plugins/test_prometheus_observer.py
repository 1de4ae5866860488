"""The Prometheus plugin's own logic, fed directly (its e2e story is in tests/e2e/test_prometheus.py)."""
from __future__ import annotations

import logging
import subprocess

import pytest
from kopf_outcomes_prometheus.observer import Observer
from kopf_outcomes_prometheus.serving import AddressError, parse_address
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kopf_outcomes import Fatal, HandlerOptions, HandlerRun, Pending, ResourceRef, Retry, Success
from kopf_outcomes.engine import PluginFailure
from tests.programs import program

RESOURCE = ResourceRef("kopf.dev", "v1", "kopfexamples", "KopfExample")
R = "kopfexamples.v1.kopf.dev"


def run(uid: str = "u1", handler: str = "delete_fn", reason: str = "delete", previous=None,
        options: HandlerOptions | None = None) -> HandlerRun:
    body = {"metadata": {"uid": uid, "name": f"name-{uid}", "namespace": "ns"}}
    return HandlerRun(handler_id=handler, reason=reason, resource=RESOURCE, body=body, retry=0, runtime=0.0,
                      deleting=reason == "delete", options=options or HandlerOptions(),
                      logger=logging.getLogger("test"), previous=previous)


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return samples(registry).get((name, tuple(sorted(labels.items()))))


def test_outcomes_are_counted_with_level_only_where_they_have_one():
    registry = CollectorRegistry()
    observer = Observer(registry, objects_reported=True)
    observer.outcome(run(), Pending("waiting"))
    observer.outcome(run(), Pending("waiting"))
    observer.outcome(run(), Retry("busy", level="WARNING"))
    observer.outcome(run(), Fatal("broken"))
    observer.outcome(run(), Success())
    total = "kopf_outcomes_handler_outcomes_total"
    assert value(registry, total, resource=R, handler="delete_fn", outcome="pending", level="") == 2
    assert value(registry, total, resource=R, handler="delete_fn", outcome="retry", level="warning") == 1
    assert value(registry, total, resource=R, handler="delete_fn", outcome="fatal", level="error") == 1
    assert value(registry, total, resource=R, handler="delete_fn", outcome="success", level="") == 1


def test_no_label_names_an_object():
    registry = CollectorRegistry()
    observer = Observer(registry, objects_reported=True)
    for uid in ("a", "b", "c"):
        observer.outcome(run(uid), Pending("waiting"))
    text = generate_latest(registry).decode()
    assert "name-" not in text and '"ns"' not in text
    assert value(registry, "kopf_outcomes_handlers_waiting", resource=R, handler="delete_fn", state="pending") == 3


def test_waiting_follows_runs_and_falls_to_zero_instead_of_vanishing():
    registry = CollectorRegistry()
    observer = Observer(registry, objects_reported=True)
    gauge = "kopf_outcomes_handlers_waiting"
    observer.outcome(run("a"), Pending("waiting"))
    observer.outcome(run("b"), Retry("busy"))
    observer.outcome(run("c"), Fatal("broken", on_delete="retain"))
    observer.outcome(run("d"), Fatal("broken"))  # released: not waiting
    assert [value(registry, gauge, resource=R, handler="delete_fn", state=s)
            for s in ("pending", "retrying", "retained")] == [1, 1, 1]
    observer.outcome(run("a"), Success())
    observer.outcome(run("b"), Success())
    assert value(registry, gauge, resource=R, handler="delete_fn", state="pending") == 0
    assert value(registry, gauge, resource=R, handler="delete_fn", state="retrying") == 0


def test_fatal_is_retained_by_the_handlers_options_too_but_only_on_deletion():
    registry = CollectorRegistry()
    observer = Observer(registry, objects_reported=True)
    observer.outcome(run("a", options=HandlerOptions(fatal_on_delete="retain")), Fatal("broken"))
    observer.outcome(run("b", reason="create", options=HandlerOptions(fatal_on_delete="retain")), Fatal("x"))
    assert value(registry, "kopf_outcomes_handlers_waiting", resource=R, handler="delete_fn",
                 state="retained") == 1


def test_the_core_report_replaces_an_objects_state_as_after_a_restart():
    registry = CollectorRegistry()
    observer = Observer(registry, objects_reported=True)
    gauge = "kopf_outcomes_handlers_waiting"
    observer.object(RESOURCE, {"metadata": {"uid": "a"}}, {"delete_fn": "pending"})
    observer.object(RESOURCE, {"metadata": {"uid": "b"}}, {"delete_fn": "retained", "other_fn": "retrying"})
    observer.object(RESOURCE, {"metadata": {"uid": "b"}}, {"delete_fn": "retained", "other_fn": "retrying"})
    assert value(registry, gauge, resource=R, handler="delete_fn", state="pending") == 1
    assert value(registry, gauge, resource=R, handler="delete_fn", state="retained") == 1
    assert value(registry, gauge, resource=R, handler="other_fn", state="retrying") == 1
    observer.object(RESOURCE, {"metadata": {"uid": "b"}}, {})
    assert value(registry, gauge, resource=R, handler="other_fn", state="retrying") == 0
    assert value(registry, gauge, resource=R, handler="delete_fn", state="pending") == 1


def test_an_object_gone_while_waiting_is_forgotten_by_the_gauge_and_the_wait_clock():
    registry = CollectorRegistry()
    observer = Observer(registry, objects_reported=True)
    gauge = "kopf_outcomes_handlers_waiting"
    observer.outcome(run("a"), Pending("waiting"), now=100.0)
    observer.outcome(run("b"), Pending("waiting"), now=100.0)
    observer.object(RESOURCE, {"metadata": {"uid": "a"}}, {"delete_fn": "pending"})
    assert value(registry, gauge, resource=R, handler="delete_fn", state="pending") == 2
    assert len(observer.clock) == 2
    observer.gone({"metadata": {"uid": "a"}})  # a person removed its finalizer: it left while waiting
    assert value(registry, gauge, resource=R, handler="delete_fn", state="pending") == 1
    assert len(observer.clock) == 1  # b still waits; a's wait is no longer measured
    observer.gone({"metadata": {}})  # no uid: nothing to forget, no error


def test_without_the_core_report_the_waiting_gauge_is_not_exported():
    registry = CollectorRegistry()
    observer = Observer(registry, objects_reported=False)
    observer.outcome(run(), Pending("waiting"))
    assert not [key for key in samples(registry) if key[0] == "kopf_outcomes_handlers_waiting"]


def test_wait_time_from_the_first_pending_to_success_per_cause():
    registry = CollectorRegistry()
    observer = Observer(registry, objects_reported=True)
    observer.outcome(run("a"), Pending("waiting"), now=100.0)
    observer.outcome(run("a"), Retry("busy"), now=103.0)   # still the same wait
    observer.outcome(run("a"), Success(), now=107.0)
    observer.outcome(run("b"), Success(), now=107.0)       # never waited: not a wait
    observer.outcome(run("c", reason="create", handler="create_fn"), Pending("x"), now=10.0)
    observer.outcome(run("c", reason="create", handler="create_fn"), Success(), now=10.3)
    hist = "kopf_outcomes_handler_wait_seconds"
    assert value(registry, f"{hist}_count", resource=R, handler="delete_fn", cause="delete") == 1
    assert value(registry, f"{hist}_sum", resource=R, handler="delete_fn", cause="delete") == 7.0
    assert value(registry, f"{hist}_bucket", resource=R, handler="delete_fn", cause="delete", le="5.0") == 0
    assert value(registry, f"{hist}_bucket", resource=R, handler="delete_fn", cause="delete", le="10.0") == 1
    assert value(registry, f"{hist}_sum", resource=R, handler="create_fn", cause="create") == pytest.approx(0.3)


def test_a_wait_begun_before_a_restart_is_measured_from_the_memorys_since():
    registry = CollectorRegistry()
    observer = Observer(registry, objects_reported=True)
    previous = {"digest": "x", "outcome": "pending", "reason": "waiting", "since": "1970-01-01T00:01:40Z"}
    observer.outcome(run("a", previous=previous), Success(), now=160.0)
    assert value(registry, "kopf_outcomes_handler_wait_seconds_sum", resource=R, handler="delete_fn",
                 cause="delete") == 60.0


def test_a_wait_begun_before_a_restart_is_measured_from_the_memorys_since_across_a_pending_run():
    """After a restart the first run of a waiting handler (a recheck's, a Retry's) concludes Pending
    again: its wait still began at the memory's ``since``, not at that run."""
    registry = CollectorRegistry()
    observer = Observer(registry, objects_reported=True)
    previous = {"digest": "x", "outcome": "pending", "reason": "waiting", "since": "1970-01-01T00:01:40Z"}
    observer.outcome(run("a", previous=previous), Pending("waiting"), now=150.0)
    observer.outcome(run("a", previous=previous), Success(), now=160.0)
    assert value(registry, "kopf_outcomes_handler_wait_seconds_sum", resource=R, handler="delete_fn",
                 cause="delete") == 60.0


def test_a_fatal_ends_a_wait_without_measuring_it():
    registry = CollectorRegistry()
    observer = Observer(registry, objects_reported=True)
    observer.outcome(run("a"), Pending("waiting"), now=1.0)
    observer.outcome(run("a"), Fatal("broken"), now=2.0)
    assert len(observer.clock) == 0
    assert value(registry, "kopf_outcomes_handler_wait_seconds_count", resource=R, handler="delete_fn",
                 cause="delete") is None


def test_plugin_failures_are_counted_by_plugin_from_the_engines_fallback():
    registry = CollectorRegistry()
    observer = Observer(registry, objects_reported=True)
    fallback = PluginFailure("plugin 'broken' failed: RuntimeError: boom; the finalizer is kept", delay=1)
    observer.outcome(run(), fallback)
    observer.outcome(run(), Retry("plugin 'broken' failed: a handler's own words, not a failure"))
    assert value(registry, "kopf_outcomes_plugin_failures_total", plugin="broken") == 1


def test_a_reported_failure_is_not_counted_twice():
    registry = CollectorRegistry()
    observer = Observer(registry, objects_reported=True, failures_reported=True)
    observer.outcome(run(), PluginFailure("plugin 'broken' failed: RuntimeError: boom", delay=1))
    observer.plugin_failed("broken")
    assert value(registry, "kopf_outcomes_plugin_failures_total", plugin="broken") == 1


@pytest.mark.parametrize("text, expected", [
    ("9464", ("0.0.0.0", 9464)), (":9464", ("0.0.0.0", 9464)), ("127.0.0.1:0", ("127.0.0.1", 0)),
    ("[::1]:9464", ("::1", 9464)), ("localhost:80", ("localhost", 80)),
])
def test_addresses(text, expected):
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["", "host:", "host:port", "127.0.0.1:70000", "a b:1"])
def test_bad_addresses_name_the_setting(text):
    with pytest.raises(AddressError, match=r"KOPF_OUTCOMES_PROMETHEUS_ADDRESS=.*expected|neither"):
        parse_address(text)


def test_promtool_finds_nothing_to_lint():
    registry = CollectorRegistry()
    observer = Observer(registry, objects_reported=True)
    observer.outcome(run("a"), Pending("waiting"), now=1.0)
    observer.outcome(run("a"), Success(), now=2.0)
    observer.outcome(run("b"), Retry("busy"))
    observer.outcome(run("c"), Fatal("broken", on_delete="retain"))
    observer.outcome(run(), PluginFailure("plugin 'broken' failed: RuntimeError: boom", delay=1))
    exposition = generate_latest(registry)
    for name in ("handler_outcomes_total", "handlers_waiting", "handler_wait_seconds_bucket",
                 "plugin_failures_total"):
        assert f"kopf_outcomes_{name}".encode() in exposition
    checked = subprocess.run([program("promtool"), "check", "metrics"], input=exposition, capture_output=True)
    assert checked.returncode == 0 and not checked.stdout and not checked.stderr, \
        (checked.stdout + checked.stderr).decode()


def test_an_immediate_success_records_no_wait_whatever_the_memory_says():
    """Issue 34, finding 6: with ``remember=True`` every success on a new state recorded the time
    since the last success (the memory's ``since``) as a wait that never happened."""
    registry = CollectorRegistry()
    observer = Observer(registry, objects_reported=True)
    succeeded = {"digest": "x", "outcome": "success", "reason": "", "since": "1970-01-01T00:01:40Z"}
    observer.outcome(run("a", reason="update", previous=succeeded), Success(), now=7 * 24 * 3600.0)
    assert value(registry, "kopf_outcomes_handler_wait_seconds_count", resource=R, handler="delete_fn",
                 cause="update") is None
    retried = {"digest": "x", "outcome": "retry", "reason": "busy", "since": "1970-01-01T00:01:40Z"}
    observer.outcome(run("b", reason="update", previous=retried), Success(), now=160.0)  # waited before a restart
    assert value(registry, "kopf_outcomes_handler_wait_seconds_sum", resource=R, handler="delete_fn",
                 cause="update") == 60.0


def subrun(uid: str, child: str) -> HandlerRun:
    return run(uid, handler=f"create_fn/{child}", reason="create")._replace(kind="sub-handler")


def test_sub_handlers_built_from_data_are_counted_under_their_declared_handler():
    """Issue 34: a ``handler`` label per sub-handler id gave series per object, kept after they went."""
    registry = CollectorRegistry()
    observer = Observer(registry, objects_reported=True)
    for uid in ("a", "b", "c"):
        observer.outcome(subrun(uid, f"item-{uid}"), Pending("waiting"))
        observer.outcome(subrun(uid, "fixed"), Pending("waiting"))
    observer.outcome(run("a", handler="update_fn/spec.size", reason="update"), Pending("waiting"))  # a field handler
    handlers = {dict(labels)["handler"] for (name, labels) in samples(registry) if "handler" in dict(labels)}
    assert handlers == {"create_fn/*", "update_fn/spec.size"}
    gauge = "kopf_outcomes_handlers_waiting"
    assert value(registry, gauge, resource=R, handler="create_fn/*", state="pending") == 6
    observer.outcome(subrun("a", "item-a"), Success())  # one sub-handler done, its sibling still waits
    assert value(registry, gauge, resource=R, handler="create_fn/*", state="pending") == 5
    for uid in ("a", "b", "c"):
        observer.gone({"metadata": {"uid": uid}})
    assert value(registry, gauge, resource=R, handler="create_fn/*", state="pending") == 0


def test_idle_series_of_the_waiting_gauge_are_bounded():
    registry = CollectorRegistry()
    observer = Observer(registry, objects_reported=True)
    assert observer.waiting is not None
    limit = observer.waiting.MAX_IDLE_SERIES
    for index in range(limit + 50):  # ids the operator had once (or a plugin built from data)
        observer.outcome(run(str(index), handler=f"h{index}"), Pending("waiting"))
        observer.gone({"metadata": {"uid": str(index)}})
    assert len(observer.waiting.counts()) == limit
    assert value(registry, "kopf_outcomes_handlers_waiting", resource=R, handler="h0", state="pending") is None


def test_the_wait_clock_keeps_nothing_for_sub_handler_ids_that_stopped_running():
    """Issue 44, finding 9: a sub-handler id built from data (a new one per update) that waited and
    then was never run again kept its clock entry until the object was deleted: 1,000 updates,
    1,000 entries. Its wait is Kopf's runtime of it instead (since its first attempt)."""
    registry = CollectorRegistry()
    observer = Observer(registry, objects_reported=True)
    for n in range(1000):
        observer.outcome(subrun("a", f"item-{n}"), Pending("waiting"))
    assert len(observer.clock) == 0
    done = subrun("a", "item-999")._replace(retry=3, runtime=42.0)  # waited: three runs before this one
    observer.outcome(done, Success(), now=10_000.0)
    observer.outcome(subrun("a", "item-first-time"), Success(), now=10_000.0)  # did not wait: nothing observed
    labels = {"resource": R, "handler": "create_fn/*", "cause": "create"}
    assert value(registry, "kopf_outcomes_handler_wait_seconds_count", **labels) == 1
    assert value(registry, "kopf_outcomes_handler_wait_seconds_sum", **labels) == 42.0
