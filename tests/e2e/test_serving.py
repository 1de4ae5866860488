"""
``why`` answers first whether anything serves the object, from Kopf's peering records on the real
API server (issue 44, finding 1): a shard's operator in its peering, an object relabelled to a
shard that no operator serves, the operator stopped. A recheck that nothing runs is overdue, and
its time is not moved forward.
"""
from __future__ import annotations

import asyncio
import os
import subprocess

from kopf_outcomes.diagnosis.serving import SELECTOR_ANNOTATION
from kopf_outcomes_testing.process import OperatorProcess
from tests.e2e.conftest import ROOT, eventually
from tests.e2e.replicas import install_peering_crds
from tests.e2e.test_memory import patch
from tests.e2e.test_shards import LABEL, deleting_on, keys
from tests.e2e.test_why import cli, why

RECIPE = ROOT / "examples" / "deploy" / "shards" / "operator.py"


class PeeredOperator(OperatorProcess):
    """The operator in Kopf's peering (``--peering``, a KopfPeering in its namespace), not standalone."""

    def __init__(self, peering: str, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.peering = peering

    async def start(self) -> OperatorProcess:
        env = dict(os.environ, KUBECONFIG=self.kubeconfig, PYTHONPATH=str(self.cwd), **self.env)
        self._process = subprocess.Popen(
            [self.python, "-m", "kopf", "run", "--peering", self.peering, "--namespace", self.namespace,
             "--verbose", "--log-format=json", "--log-refkey=object", str(self.path)],
            stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=self.cwd, text=True)
        await self.wait_for(lambda r: r.message.startswith("Starting the watch-stream for "), timeout=30,
                            what="the operator to start")
        return self


def kopf_peering(cluster, namespace: str, name: str, selector: str) -> None:
    manifest = (f"apiVersion: kopf.dev/v1\nkind: KopfPeering\nmetadata:\n  name: {name}\n  namespace: {namespace}\n"
                f"  annotations:\n    {SELECTOR_ANNOTATION}: '{selector}'\n")
    done = subprocess.run(["kubectl", "--kubeconfig", str(cluster.admin_kubeconfig), "apply", "-f", "-"],
                          input=manifest, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


async def test_why_says_who_serves_the_object_and_when_nothing_does(cluster, objects, namespace):
    install_peering_crds(cluster)
    kopf_peering(cluster, namespace, "shard-a", f"{LABEL}=a")
    op = PeeredOperator("shard-a", RECIPE, namespace, kubeconfig=str(cluster.admin_kubeconfig),
                        env={"SHARD": "a", "RECHECK_SECONDS": "2", "SHARD_SELECTION": "client"}, cwd=ROOT)
    async with op:
        for name in ("served", "left"):
            await deleting_on(objects, namespace, name, "a")
        await eventually(lambda: asyncio.sleep(0, len(keys(op)) == 2), what="both to start their external deletion")

        async def serving(name: str, status: str) -> dict | None:
            report = await why(cluster, namespace, name)
            return report if report["serving"]["status"] == status else None

        served = await eventually(lambda: serving("served", "served"), what="the peering to show its operator")
        assert served["serving"]["message"].startswith("served by peering shard-a: ")
        [handler] = served["handlers"]
        assert handler["overdue"] is False and handler["nextRecheck"] is not None

        await patch(objects, namespace, "left", {"metadata": {"labels": {LABEL: "c"}}})  # a shard nobody serves
        left = await why(cluster, namespace, "left")
        assert left["serving"]["status"] == "not-served"
        assert left["serving"]["message"].startswith("NOT SERVED: no peering's selection covers this object's labels")
        assert left["handlers"][0]["overdue"] is True and left["handlers"][0]["nextRecheck"] is None
        code, table = await cli(cluster, "why", "kex/left", "-n", namespace)
        assert code == 0 and "  serving: NOT SERVED" in table and "OVERDUE" in table, table

    # The operator stopped (Kopf removes it from the peering at a clean exit): nothing serves "served".
    stopped = await why(cluster, namespace, "served")
    assert stopped["serving"]["status"] == "not-served", stopped["serving"]
    assert stopped["serving"]["message"].startswith("NOT SERVED: no operator of peering shard-a (which covers it)")
    assert stopped["handlers"][0]["overdue"] is True
    code, first = await cli(cluster, "why", "kex/served", "-n", namespace)
    await asyncio.sleep(2.5)  # more than a recheck's interval: the time shown stays where it was
    code, later = await cli(cluster, "why", "kex/served", "-n", namespace)
    overdue = [line.split("OVERDUE", 1)[1] for line in first.splitlines() if "OVERDUE" in line]
    assert overdue and overdue == [line.split("OVERDUE", 1)[1] for line in later.splitlines() if "OVERDUE" in line]


async def test_without_a_peering_it_says_it_cannot_tell(cluster, objects, namespace, operator):
    async with operator(str(RECIPE.relative_to(ROOT)), RECHECK_SECONDS="600"):  # --standalone
        await deleting_on(objects, namespace, "alone", "any")
        report = await eventually(lambda: why(cluster, namespace, "alone"), what="why")
    assert report["serving"]["status"] == "unknown" and "cannot be told" in report["serving"]["message"]
