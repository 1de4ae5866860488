"""
The sharding recipe (examples/deploy/shards/) and its how-to (docs/howto/shard.md): the how-to's
tested command blocks run as written; the server dry run accepts every object of the recipe. (The
move of an object between shards is the how-to's command too: tests/e2e/test_shards.py runs it.)
"""
from __future__ import annotations

from tests.docs.blocks import ROOT, blocks
from tests.e2e.replicas import DEPLOY, documents
from tests.e2e.test_deploy_recipe import run

HOWTO = ROOT / "docs" / "howto" / "shard.md"
TESTED = [block for block in blocks(HOWTO) if block.language == "sh" and "tested" in block.flags]
SHARDS = DEPLOY / "shards"


def test_the_howto_has_its_tested_blocks() -> None:
    assert [len(block.code.splitlines()) for block in TESTED] == [4, 1]


def test_the_howto_lists_every_file_of_the_recipe() -> None:
    text = HOWTO.read_text()
    files = [p.name for p in sorted(SHARDS.iterdir()) if p.suffix in (".yaml", ".py") and p.name != "__init__.py"]
    assert len(files) == 5
    assert [name for name in files if f"`{name}`" not in text] == []


def test_the_recipe_applies_on_the_api_server_as_the_howto_says(cluster) -> None:
    outputs = [run(line, cluster) for line in TESTED[0].code.splitlines() if line.strip()]
    manifests = sorted(SHARDS.glob("*.yaml"))
    expected = [f"{d['kind'].lower()}.{d['apiVersion'].split('/')[0]}/{d['metadata']['name']}"
                if "/" in d["apiVersion"] else f"{d['kind'].lower()}/{d['metadata']['name']}"
                for d in documents(*manifests)]
    lines = outputs[-1].splitlines()
    assert len(lines) == len(expected) == 9, outputs[-1]
    for name in expected:
        assert any(line.startswith(f"{name} ") and line.endswith("(server dry run)") for line in lines), \
            (name, outputs[-1])


def test_each_label_shard_has_its_value_and_its_own_peering() -> None:
    deployments = [d for d in documents(SHARDS / "30-label-shards.yaml") if d["kind"] == "Deployment"]
    values = [next(e["value"] for e in d["spec"]["template"]["spec"]["containers"][0]["env"] if e["name"] == "SHARD")
              for d in deployments]
    peerings = {d["metadata"]["name"] for d in documents(SHARDS / "20-peering.yaml")}
    assert values == ["a", "b"] and peerings == {f"kopf-outcomes-shard-{value}" for value in values}
