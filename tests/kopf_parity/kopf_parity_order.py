"""
A pytest plugin for both runs of Kopf's suite: collect the tests in one order in every process.

Some of Kopf's tests are parametrized from sets of classes, whose order follows their ids in memory
and so differs between processes; pytest-xdist refuses workers that collected different orders.
Only the parametrizations of each test function are sorted (by node id); the functions keep their
order, since a few of Kopf's tests rely on an earlier test of their module having run.
"""
from __future__ import annotations

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        first.setdefault(item.nodeid.split("[", 1)[0], index)
    items.sort(key=lambda item: (first[item.nodeid.split("[", 1)[0]], item.nodeid))
