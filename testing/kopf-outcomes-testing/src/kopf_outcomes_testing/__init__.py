"""Test Kopf operators against a real local Kubernetes control plane (kube-apiserver + etcd).

The pytest fixtures (``k8s_cluster``, ``k8s_api``, ``k8s_restricted_api``, ``k8s_namespace``,
``kopf_operator``) are registered through the ``pytest11`` entry point. Every pytest run in an
environment with this package loads that plugin, so nothing here is imported before it is used:
the names below are resolved on first access.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kopf_outcomes_testing._version import __version__

if TYPE_CHECKING:
    from kopf_outcomes_testing.clients import api_client
    from kopf_outcomes_testing.cluster import ClusterError, ClusterInfo, ensure_running
    from kopf_outcomes_testing.cluster.audit import AuditLog
    from kopf_outcomes_testing.operators import operator_registry
    from kopf_outcomes_testing.process import OperatorProcess, Record

_LAZY = {
    "AuditLog": "kopf_outcomes_testing.cluster.audit",
    "ClusterError": "kopf_outcomes_testing.cluster",
    "ClusterInfo": "kopf_outcomes_testing.cluster",
    "OperatorProcess": "kopf_outcomes_testing.process",
    "Record": "kopf_outcomes_testing.process",
    "api_client": "kopf_outcomes_testing.clients",
    "ensure_running": "kopf_outcomes_testing.cluster",
    "operator_registry": "kopf_outcomes_testing.operators",
}

__all__ = [
    "AuditLog",
    "ClusterError",
    "ClusterInfo",
    "OperatorProcess",
    "Record",
    "__version__",
    "api_client",
    "ensure_running",
    "operator_registry",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
