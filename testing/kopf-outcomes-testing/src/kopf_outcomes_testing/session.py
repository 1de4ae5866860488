"""The cluster of one pytest session: found, started (never built unless allowed), and released.

Imported by the ``k8s_cluster`` fixture on first use, not when the plugin is registered.
"""
from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kopf_outcomes_testing.cluster import ClusterError, ClusterInfo, control_plane
from kopf_outcomes_testing.cluster.external import from_kubeconfig
from kopf_outcomes_testing.cluster.kubeconfig import RESTRICTED_KUBECONFIG_ENV

# The Kubernetes clients read KUBECONFIG once, on import (e.g. at test collection): without
# pointing these at the cluster, their default loaders (and Kopf's logins via them) miss it.
_CLIENT_CONFIG_MODULES = ("kubernetes_asyncio.config.kube_config", "kubernetes.config.kube_config")


class SessionCluster:
    """What ``k8s_cluster`` does, apart from pytest's fixture machinery."""

    def __init__(self, *, kubeconfig: str | None, stop: bool, build: bool, capture: Any) -> None:
        self.kubeconfig = kubeconfig
        self.stop = stop
        self.build = build
        self.capture = capture
        self.started_here = False

    def start(self) -> ClusterInfo:
        """The cluster's access data; a :class:`ClusterError` becomes one clean test failure."""
        return self._or_fail("the Kubernetes cluster for the tests is not available", self._start)

    def add_controllers(self, info: ClusterInfo) -> ClusterInfo:
        """The same cluster with kube-controller-manager running (started now if missing).

        A cluster of ``--kopf-outcomes-kubeconfig`` is a real one: it has its controllers.
        """
        if self.kubeconfig is not None:
            return info
        return self._or_fail("kube-controller-manager for the tests is not available",
                             lambda: self._ensure(controllers=True))

    def _or_fail(self, what: str, action: Callable[[], ClusterInfo]) -> ClusterInfo:
        try:
            return action()
        except ClusterError as e:
            problem = str(e)
        # Outside the `except` block: no "during handling of the above exception" chain.
        pytest.fail(f"{what}: {problem}", pytrace=False)

    def _start(self) -> ClusterInfo:
        if self.kubeconfig is not None:
            return from_kubeconfig(Path(self.kubeconfig))
        was_running = control_plane.running() is not None
        info = self._ensure(controllers=False)
        self.started_here = not was_running
        return info

    def _ensure(self, *, controllers: bool) -> ClusterInfo:
        showing = (self.capture.global_and_fixture_disabled() if self.capture
                   else contextlib.nullcontext())
        with showing:  # starting (or an allowed build) takes a while: let its progress be seen
            return control_plane.ensure_running(
                build=self.build, controllers=controllers,
                progress=lambda message: print(message, file=sys.stderr))

    @contextlib.contextmanager
    def environment(self, info: ClusterInfo) -> Iterator[None]:
        """``KUBECONFIG`` (and the restricted one) set for the session, restored afterwards."""
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("KUBECONFIG", str(info.admin_kubeconfig))
            if info.restricted_kubeconfig is not None:
                patch.setenv(RESTRICTED_KUBECONFIG_ENV, str(info.restricted_kubeconfig))
            for name in _CLIENT_CONFIG_MODULES:
                if name in sys.modules:
                    patch.setattr(sys.modules[name], "KUBE_CONFIG_DEFAULT_LOCATION",
                                  str(info.admin_kubeconfig))
            yield

    def finish(self) -> None:
        """Stop the local control plane if asked to and if this session started it."""
        if self.stop and self.started_here:
            control_plane.stop()
