"""
A pytest plugin for both runs of Kopf's suite: collect the tests in one order, sorted by node id.

Some of Kopf's tests are parametrized from sets of classes, whose order follows their ids in memory
and so differs between processes; pytest-xdist refuses workers that collected different orders.
"""
from __future__ import annotations

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.nodeid)
