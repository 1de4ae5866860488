"""The parity job's reading of JUnit reports: a wrong reading would hide new failures."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.kopf_parity import results

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
  <testcase classname="tests.handling.test_delays" name="test_ok[a-b]"/>
  <testcase classname="tests.handling.test_delays" name="test_failed"><failure message="x"/></testcase>
  <testcase classname="tests.k8s.test_x.TestGroup" name="test_setup_error"><error message="x"/></testcase>
  <testcase classname="tests.k8s.test_x" name="test_skipped"><skipped message="x"/></testcase>
  <testcase classname="tests.k8s.test_x" name="test_teardown"/>
  <testcase classname="tests.k8s.test_x" name="test_teardown"><error message="teardown"/></testcase>
  <testcase classname="tests.k8s.test_x" name="test_rerun"><failure message="x"/></testcase>
  <testcase classname="tests.k8s.test_x" name="test_rerun"/>
  <testcase classname="" name="tests.admission.test_certificates"><error message="collection"/></testcase>
</testsuite></testsuites>
"""


def test_outcomes_per_test(tmp_path: Path) -> None:
    (tmp_path / "report.xml").write_text(REPORT)
    read = results.read(tmp_path / "report.xml")
    assert read.ids("passed") == {"tests.handling.test_delays::test_ok[a-b]"}
    assert read.ids("skipped") == {"tests.k8s.test_x::test_skipped"}
    assert read.ids("failed") == {
        "tests.handling.test_delays::test_failed",
        "tests.k8s.test_x.TestGroup::test_setup_error",
        "tests.k8s.test_x::test_teardown",  # passed, then erred in teardown: failed
        "tests.k8s.test_x::test_rerun",  # a failure is never overwritten by a later entry
        "::tests.admission.test_certificates",
    }


def test_a_missing_report_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no report"):
        results.read(tmp_path / "absent.xml")


@pytest.mark.parametrize(("junit", "node"), [
    ("tests.handling.test_delays::test_x[cluster-slow]", "tests/handling/test_delays.py::test_x[cluster-slow]"),
    ("tests.a.test_b.TestC::test_d[x.y]", "tests/a/test_b.py::TestC::test_d[x.y]"),
    ("::tests.admission.test_certificates", "tests/admission/test_certificates.py"),
])
def test_node_ids(junit: str, node: str) -> None:
    assert results.node_id(junit) == node
