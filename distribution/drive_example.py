"""The example operator, run by another virtualenv's ``kopf run``, through the whole seed story.

Run by ``check_dist.py`` with the project's Python (which has the testing tools); the operator
runs with ``--operator-python`` (a virtualenv with only the runtime wheel). Proves that the
runtime alone runs the example, and reports which login function Kopf used there.
"""
from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from kubernetes_asyncio import client

from examples.multistep_deletion.external_system import ExternalSystem
from kopf_outcomes_testing import OperatorProcess, api_client, ensure_running
from kopf_outcomes_testing.namespaces import create_namespace, delete_namespace

ROOT = Path(__file__).resolve().parents[1]
OPERATOR = ROOT / "examples" / "multistep_deletion" / "example.py"
NAME = "dist-check"


async def story(operator_python: str) -> None:
    info = ensure_running()
    namespace = create_namespace(info.admin_client(), prefix="dist-check-")
    system = ExternalSystem(kubeconfig=str(info.admin_kubeconfig), delay=1.0, via="status")
    runner, url = await system.serve()
    try:
        op = OperatorProcess(OPERATOR, namespace, kubeconfig=str(info.admin_kubeconfig), cwd=ROOT,
                             python=operator_python, env={"EXTERNAL_SYSTEM_URL": url})
        async with op, api_client(info.admin_kubeconfig) as api:
            objects = client.CustomObjectsApi(api)
            await objects.create_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", {
                "apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": NAME}, "spec": {}})
            await op.wait_for(lambda r: r.message.startswith("Handling cycle is finished"), what="the finalizer")
            started = time.monotonic()
            await objects.delete_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", NAME)
            await op.wait_for(lambda r: "waiting for the external system" in r.message, what="Pending")
            await op.wait_for(lambda r: "releasing the object" in r.message, what="the callback's effect")
            while True:
                try:
                    await objects.get_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfexamples", NAME)
                except client.ApiException as e:
                    if e.status == 404:
                        break
                    raise
                if time.monotonic() - started > 30:
                    raise AssertionError("the object was not released within 30 s:\n" + op.text()[-3000:])
                await asyncio.sleep(0.1)
            logins = sorted({r.message for r in op.records() if r.message.startswith("Activity 'login")})
            errors = [r.message for r in op.records() if r.level == "ERROR"]
        assert not errors, errors
        print(f"example operator: deleted and released in {time.monotonic() - started:.1f}s; {logins}")
    finally:
        await runner.cleanup()
        delete_namespace(info.admin_client(), namespace)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operator-python", required=True)
    asyncio.run(story(parser.parse_args().operator_python))


if __name__ == "__main__":
    main()
