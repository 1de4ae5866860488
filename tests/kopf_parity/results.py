"""Read a pytest JUnit XML report into one result per test, and compare two runs."""
from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ElementTree
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Results:
    outcomes: dict[str, str]  # test id -> "passed" | "failed" | "skipped"

    def ids(self, outcome: str) -> set[str]:
        return {test for test, seen in self.outcomes.items() if seen == outcome}

    def count(self, outcome: str) -> int:
        return len(self.ids(outcome))


def read(path: Path) -> Results:
    """One outcome per test; a test that errs in setup or teardown, or fails, is "failed"."""
    if not path.exists():
        raise SystemExit(f"parity: pytest wrote no report at {path}")
    outcomes: dict[str, str] = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        if case.find("failure") is not None or case.find("error") is not None:
            seen = "failed"
        elif case.find("skipped") is not None:
            seen = "skipped"
        else:
            seen = "passed"
        if outcomes.get(test) != "failed":  # a teardown error after a pass is reported twice
            outcomes[test] = seen
    return Results(outcomes)


def node_id(test: str) -> str:
    """JUnit's ``tests.handling.test_delays::test_x[a]`` as pytest's ``tests/handling/test_delays.py::test_x[a]``."""
    classname, name = test.split("::", 1)
    if not classname:  # a module that failed to collect: its dotted name only
        return name.replace(".", "/") + ".py"
    parts = classname.split(".")
    # A test class appears as the last dotted part(s) starting with a capital letter.
    module = [part for part in parts if not part[:1].isupper()]
    classes = [part for part in parts if part[:1].isupper()]
    return "::".join(["/".join(module) + ".py", *classes, name])
