"""The example files match what the package installs, and work on the real API server."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio.client import CustomObjectsApi

from kopf_outcomes_testing.cluster.binaries import BUILDS, _throwaway_gomod
from kopf_outcomes_testing.cluster.resources import EXAMPLE_CRD, GROUP, PLURAL, VERSION

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_crd_file_is_the_installed_crd() -> None:
    assert yaml.safe_load((EXAMPLES / "crd.yaml").read_text()) == EXAMPLE_CRD


async def test_sample_object_can_be_created(k8s_api: Any, k8s_namespace: str) -> None:
    body = yaml.safe_load((EXAMPLES / "obj.yaml").read_text())
    created = await CustomObjectsApi(k8s_api).create_namespaced_custom_object(
        GROUP, VERSION, k8s_namespace, PLURAL, body)
    assert created["kind"] == "KopfExample"
    assert created["spec"] == body["spec"]


def test_throwaway_gomod_pins_local_siblings_and_keeps_published_replaces() -> None:
    etcd = next(b for b in BUILDS if b.binary == "etcd")
    upstream = "\n".join([
        "module go.etcd.io/etcd/server/v3", "", "go 1.23.0", "",
        "replace (",
        "\tgo.etcd.io/etcd/api/v3 => ../api",
        "\tgo.etcd.io/etcd/client/v3 => ../client/v3",
        ")",
        "replace go.etcd.io/etcd => ./FORBIDDEN_DEPENDENCY",
        "replace github.com/x/y v1.0.0 => github.com/z/y v1.0.1",
        "replace (", "\tk8s.io/klog/v2 =>  github.com/simonpasquier/klog-gokit/v3 v3.3.0", ")",
    ])
    assert _throwaway_gomod(etcd, upstream).splitlines() == [
        "module kopfoutcomesbuild", "", "go 1.23.0", "",
        "require go.etcd.io/etcd/server/v3 v3.6.4", "",
        "replace (",
        "\tgo.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 v3.6.4",
        "\tgo.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 v3.6.4",
        "\tgithub.com/x/y v1.0.0 => github.com/z/y v1.0.1",
        "\tk8s.io/klog/v2 => github.com/simonpasquier/klog-gokit/v3 v3.3.0",
        ")",
    ]
