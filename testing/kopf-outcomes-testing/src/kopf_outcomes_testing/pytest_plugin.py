"""Pytest fixtures: a real local Kubernetes control plane, clients for it, Kopf operators on it.

Loaded through the ``pytest11`` entry point in every pytest run of an environment that has this
package, also in projects that never use it: so registering it imports only pytest and the
standard library. Kopf, kubernetes-asyncio, cryptography and the control plane are imported
inside the fixtures, when a test first uses one (a test counts the modules, see
``tests/packaging``).

Options (each also an environment variable, for CI):

``--kopf-outcomes-kubeconfig PATH`` (``KOPF_OUTCOMES_KUBECONFIG``)
    use the cluster of that kubeconfig's current context; nothing is started or stopped.
``--kopf-outcomes-stop-cluster`` (``KOPF_OUTCOMES_STOP_CLUSTER=1``)
    stop the local control plane after the session if this session started it. By default it
    is kept: the next session (or a parallel one) reuses it, as ``cluster up`` does.
``--kopf-outcomes-build`` (``KOPF_OUTCOMES_BUILD=1``)
    allow building kube-apiserver and etcd (and kube-controller-manager, for ``k8s_controllers``)
    with Go inside the session (minutes, once). Without it, missing binaries fail with the
    command to get them instead.
"""
from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pytest

if TYPE_CHECKING:
    import kopf
    from kopf.testing import KopfRunner

    from kopf_outcomes_testing.cluster import ClusterInfo
    from kopf_outcomes_testing.session import SessionCluster

KUBECONFIG_ENV = "KOPF_OUTCOMES_KUBECONFIG"
STOP_ENV = "KOPF_OUTCOMES_STOP_CLUSTER"
BUILD_ENV = "KOPF_OUTCOMES_BUILD"


def _async_fixture(fn: Any) -> Any:
    """pytest-asyncio's fixture decorator, imported only when pytest-asyncio is there anyway."""
    try:
        from pytest_asyncio import fixture
    except ImportError:  # pragma: no cover - a dependency; without it pytest reports the misuse
        return pytest.fixture(fn)
    return fixture(fn)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kopf-outcomes", "kopf-outcomes: a local Kubernetes control plane")
    group.addoption("--kopf-outcomes-kubeconfig", metavar="PATH", default=None,
                    help=f"use the cluster of this kubeconfig instead of starting the local one"
                         f" (env: {KUBECONFIG_ENV}).")
    group.addoption("--kopf-outcomes-stop-cluster", action="store_true", default=None,
                    help=f"stop the local control plane after the session if it started it;"
                         f" default: keep it for the next session (env: {STOP_ENV}=1).")
    group.addoption("--kopf-outcomes-build", action="store_true", default=None,
                    help=f"allow a Go build of kube-apiserver and etcd (minutes, once) when"
                         f" they are missing; default: fail with how to get them (env: {BUILD_ENV}=1).")


def _flag(config: pytest.Config, option: str, env: str) -> bool:
    value = config.getoption(option)
    if value is not None:
        return bool(value)
    return os.environ.get(env, "").strip().lower() in {"1", "true", "yes", "on"}


def _session(config: pytest.Config) -> SessionCluster:
    """The session's cluster as the options (or their environment variables) ask for it."""
    from kopf_outcomes_testing.session import SessionCluster

    kubeconfig = config.getoption("--kopf-outcomes-kubeconfig") or os.environ.get(KUBECONFIG_ENV)
    return SessionCluster(
        kubeconfig=kubeconfig or None,
        stop=_flag(config, "--kopf-outcomes-stop-cluster", STOP_ENV),
        build=_flag(config, "--kopf-outcomes-build", BUILD_ENV),
        capture=config.pluginmanager.getplugin("capturemanager"),
    )


@pytest.fixture(scope="session")
def k8s_cluster(request: pytest.FixtureRequest) -> Iterator[ClusterInfo]:
    """The cluster: the local control plane (started if needed), or the one of the given kubeconfig.

    ``KUBECONFIG`` is set to its admin kubeconfig for the session.
    """
    session = _session(request.config)
    info = session.start()  # on failure: pytest.fail() with the cause and the hint, once
    try:
        with session.environment(info):
            yield info
    finally:
        session.finish()


@pytest.fixture(scope="session")
def k8s_controllers(request: pytest.FixtureRequest, k8s_cluster: ClusterInfo) -> ClusterInfo:
    """The cluster with kube-controller-manager: garbage collection and namespace deletion.

    Opt-in, as it costs a process (and, once, a Go build): started next to the running control
    plane if missing, and kept with it (``cluster down`` stops it).
    """
    return _session(request.config).add_controllers(k8s_cluster)


@_async_fixture
async def k8s_api(k8s_cluster: ClusterInfo) -> AsyncIterator[Any]:
    """A kubernetes-asyncio ``ApiClient`` as the admin (group system:masters)."""
    from kopf_outcomes_testing.clients import api_client

    async with api_client(k8s_cluster.admin_kubeconfig) as api:
        yield api


@_async_fixture
async def k8s_restricted_api(k8s_cluster: ClusterInfo) -> AsyncIterator[Any]:
    """A kubernetes-asyncio ``ApiClient`` as the user who may patch KopfExamples, not status."""
    from kopf_outcomes_testing.clients import api_client

    if k8s_cluster.restricted_kubeconfig is None:
        pytest.fail("k8s_restricted_api needs the local control plane's restricted user;"
                    " the cluster of --kopf-outcomes-kubeconfig has none", pytrace=False)
    async with api_client(k8s_cluster.restricted_kubeconfig) as api:
        yield api


@pytest.fixture
def k8s_namespace(k8s_cluster: ClusterInfo) -> Iterator[str]:
    """A fresh namespace for one test; afterwards emptied and deleted."""
    from kopf_outcomes_testing.namespaces import create_namespace, delete_namespace

    admin = k8s_cluster.admin_client()
    name = create_namespace(admin)
    yield name
    delete_namespace(admin, name)


class KopfOperatorFactory(Protocol):
    """The ``kopf_operator`` fixture: prepares (does not start) an in-process operator."""

    def __call__(self, *paths: str | os.PathLike[str], namespace: str | None = None,
                 registry: kopf.OperatorRegistry | None = None,
                 settings: kopf.OperatorSettings | None = None,
                 args: Sequence[str] = (), timeout: float = 30.0) -> KopfRunner: ...


@pytest.fixture
def kopf_operator(k8s_cluster: ClusterInfo) -> KopfOperatorFactory:
    """Prepare ``kopf run --standalone`` in a thread of this process; use it as a context manager.

    Without ``registry``, handlers come from ``paths`` (and the default registry) and the
    operator logs in via ``KUBECONFIG`` as the admin; pass a registry from
    :func:`kopf_outcomes_testing.operator_registry` to choose the user. Example::

        with kopf_operator("example.py", namespace=k8s_namespace) as runner:
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
