"""
Scenario 7: shards by label (the sharding recipe's shape), three processes; 10% of the waiting
objects relabelled to another shard mid-wait, one shard SIGKILLed and restarted. kopf-outcomes,
and stock Kopf beside it (a finalizer per shard, as Kopf asks of several operators on one resource).
"""
from __future__ import annotations

import random

import pytest
from kopf import OperatorSettings

from tests.chaos.helpers import DEFAULT_FINALIZER, QUICK, ROOT, seed
from tests.chaos.shards import MOVED, shards

OURS = ROOT / "tests/chaos/operators/shard.py"
STOCK = ROOT / "tests/chaos/operators/stock_shard.py"


@pytest.mark.parametrize("selection", [
    "client",
    pytest.param("server", marks=pytest.mark.skipif(
        not hasattr(OperatorSettings().watching, "label_selectors"),
        reason="Kopf < 1.45 selects no labels on the server")),
])
async def test_shards_with_kopf_outcomes(objects, namespace, operator, report, selection):
    """Selected by the API server, a moved object is "deleted" for the shard it leaves and "added"
    for the one it joins: the same figures must hold."""
    name = "shards" + ("-selected" if selection == "server" else "")
    report.scenario, report.seed = name + ("-quick" if QUICK else ""), seed()
    await shards(OURS, report, objects, namespace, random.Random(report.seed), operator, lambda _: DEFAULT_FINALIZER,
                 selection)
    report.write()

    extra = report.extra
    assert report.early_releases == []
    assert report.stuck == []
    assert report.operator_exits == []
    assert extra["objects_not_started_exactly_once_by_key_main"] == []
    assert extra["starts_max_raw_per_object_main"] == 1
    assert extra["writes_while_waiting"] == 0
    # The moved objects are woken on their new shard as fast as the others on theirs (at the full
    # size, every shard handles every object's events: the callbacks queue up on a small machine).
    assert extra["wake_after_move_s"]["n"] == MOVED
    assert extra["wake_after_move_s"]["max"] <= extra["wake_after_callback_s"]["max"] + 5


async def test_shards_with_stock_kopf_for_comparison(objects, namespace, operator, report):
    """Stock Kopf's figures are the baseline. What is asserted is what it does to a moved object:
    the shard it leaves releases it, and the shard it joins cannot add its finalizer mid-deletion."""
    report.scenario, report.seed = "shards-stock" + ("-quick" if QUICK else ""), seed()
    await shards(STOCK, report, objects, namespace, random.Random(report.seed), operator,
                 lambda shard: f"shard-{shard}.example.com/finalizer")
    report.write()

    released = {entry.split(":")[0].split("/", 1)[1] for entry in report.early_releases}
    assert set(report.extra["moved"]) <= released
    assert report.stuck == []
