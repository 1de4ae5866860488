"""Pytest fixtures: a real local Kubernetes control plane, clients for it, Kopf operators on it.

Loaded through the ``pytest11`` entry point for every pytest run, so it starts nothing and
imports nothing heavy until a test uses one of its fixtures. The control plane is left running
after the session for the next one (``kopf-outcomes cluster down`` stops it): other sessions
may be sharing it.
"""
from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from kopf_outcomes.cluster import ClusterError, ClusterInfo, ensure_running
from kopf_outcomes.cluster.kubeconfig import RESTRICTED_KUBECONFIG_ENV
from kopf_outcomes.testing.clients import api_client
from kopf_outcomes.testing.namespaces import create_namespace, delete_namespace

if TYPE_CHECKING:
    import kopf
    from kopf.testing import KopfRunner

try:
    from pytest_asyncio import fixture as async_fixture
except ImportError:  # pragma: no cover - without it, pytest reports async fixtures itself
    async_fixture = pytest.fixture  # type: ignore[assignment]  # same use, other overloads


class KopfOperatorFactory(Protocol):
    """The ``kopf_operator`` fixture: prepares (does not start) an in-process operator."""

    def __call__(self, *paths: str | os.PathLike[str], namespace: str | None = None,
                 registry: kopf.OperatorRegistry | None = None,
                 settings: kopf.OperatorSettings | None = None,
                 args: Sequence[str] = (), timeout: float = 30.0) -> KopfRunner: ...


@pytest.fixture(scope="session")
def k8s_cluster(request: pytest.FixtureRequest) -> Iterator[ClusterInfo]:
    """The running control plane (started, or built, if needed); ``KUBECONFIG`` set to admin."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    showing = capture.global_and_fixture_disabled() if capture else contextlib.nullcontext()
    try:
        with showing:  # a first build takes minutes: let its progress be seen
            info = ensure_running(progress=lambda message: print(message, file=sys.stderr))
    except ClusterError as e:
        pytest.fail(f"the local Kubernetes control plane is not available: {e}", pytrace=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KUBECONFIG", str(info.admin_kubeconfig))
        patch.setenv(RESTRICTED_KUBECONFIG_ENV, str(info.restricted_kubeconfig))
        # The Kubernetes clients read KUBECONFIG once, on import (e.g. at test collection):
        # without this, their default loaders (and Kopf's logins via them) miss the cluster.
        for name in ("kubernetes_asyncio.config.kube_config", "kubernetes.config.kube_config"):
            if name in sys.modules:
                patch.setattr(sys.modules[name], "KUBE_CONFIG_DEFAULT_LOCATION",
                              str(info.admin_kubeconfig))
        yield info


@async_fixture
async def k8s_api(k8s_cluster: ClusterInfo) -> AsyncIterator[Any]:
    """A kubernetes-asyncio ``ApiClient`` as the admin (group system:masters)."""
    async with api_client(k8s_cluster.admin_kubeconfig) as api:
        yield api


@async_fixture
async def k8s_restricted_api(k8s_cluster: ClusterInfo) -> AsyncIterator[Any]:
    """A kubernetes-asyncio ``ApiClient`` as the user who may patch KopfExamples, not status."""
    async with api_client(k8s_cluster.restricted_kubeconfig) as api:
        yield api


@pytest.fixture
def k8s_namespace(k8s_cluster: ClusterInfo) -> Iterator[str]:
    """A fresh namespace for one test; afterwards emptied and deleted."""
    admin = k8s_cluster.admin_client()
    name = create_namespace(admin)
    yield name
    delete_namespace(admin, name)


@pytest.fixture
def kopf_operator(k8s_cluster: ClusterInfo) -> KopfOperatorFactory:
    """Prepare ``kopf run --standalone`` in a thread of this process; use it as a context manager.

    Without ``registry``, handlers come from ``paths`` (and the default registry) and the
    operator logs in via ``KUBECONFIG`` as the admin; pass a registry from
    :func:`kopf_outcomes.testing.operator_registry` to choose the user. Example::

        with kopf_operator("operator.py", namespace=k8s_namespace) as runner:
            ...  # the operator runs here
        assert runner.exit_code == 0, runner.output
    """
    from kopf.testing import KopfRunner

    def prepare(*paths: str | os.PathLike[str], namespace: str | None = None,
                registry: kopf.OperatorRegistry | None = None,
                settings: kopf.OperatorSettings | None = None,
                args: Sequence[str] = (), timeout: float = 30.0) -> KopfRunner:
        scope = ["--namespace", namespace] if namespace else ["--all-namespaces"]
        argv = ["run", "--standalone", *scope, *args, *(os.fspath(p) for p in paths)]
        return KopfRunner(argv, registry=registry, settings=settings, timeout=timeout)

    return prepare
