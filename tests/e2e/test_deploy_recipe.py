"""
The deployment recipe (examples/deploy/) and its how-to (docs/howto/scale-out.md) on the real API
server: the how-to's tested command blocks run as written, with the cluster's admin kubeconfig;
the server dry run accepts every object of the recipe. (test_peering.py runs the operator as the
Deployment does, under the recipe's RBAC; the pods themselves need a kubelet.)

The first block creates, for real, Kopf's peering CRDs and the recipe's namespace and peering
object (kopf-outcomes-system): idempotent, and harmless on the test cluster.
"""
from __future__ import annotations

import os
import subprocess

from tests.docs.blocks import ROOT, blocks
from tests.e2e.replicas import DEPLOY, MANIFESTS, documents
from tests.programs import path_with

HOWTO = ROOT / "docs" / "howto" / "scale-out.md"
TESTED = [block for block in blocks(HOWTO) if block.language == "sh" and "tested" in block.flags]


def run(line: str, cluster) -> str:
    env = dict(os.environ, KUBECONFIG=str(cluster.admin_kubeconfig), PATH=path_with(line.split()[0]))
    done = subprocess.run(line, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
    return done.stdout


def test_the_howto_has_its_tested_blocks() -> None:
    assert [len(block.code.splitlines()) for block in TESTED] == [4, 2]


def test_the_howto_lists_every_file_of_the_recipe() -> None:
    text = HOWTO.read_text()
    files = [p.relative_to(DEPLOY).as_posix() for p in sorted(DEPLOY.rglob("*"))
             if p.is_file() and p.suffix in (".yaml", ".py") and p.name != "__init__.py"]
    assert [name for name in files if f"`{name}`" not in text] == []


def test_the_recipe_applies_on_the_api_server_as_the_howto_says(cluster) -> None:
    outputs = [run(line, cluster) for line in TESTED[0].code.splitlines() if line.strip()]
    dry_run = outputs[-1]
    expected = [f"{d['kind'].lower()}.{d['apiVersion'].split('/')[0]}/{d['metadata']['name']}"
                if "/" in d["apiVersion"] else f"{d['kind'].lower()}/{d['metadata']['name']}"
                for d in documents(*MANIFESTS)]
    lines = dry_run.splitlines()
    assert len(lines) == len(expected) == 11, dry_run
    for name in expected:
        assert any(line.startswith(f"{name} ") and line.endswith("(server dry run)") for line in lines), \
            (name, dry_run)


def test_the_alert_rules_check_as_the_howto_says(cluster) -> None:
    outputs = [run(line, cluster) for line in TESTED[1].code.splitlines() if line.strip()]
    assert "SUCCESS: 4 rules found" in outputs[0]
    assert "SUCCESS" in outputs[1]
