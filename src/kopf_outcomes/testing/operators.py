"""Kopf registries for in-process operators that log in to the local control plane.

A fresh ``kopf.OperatorRegistry()`` has no login handlers (only the default registry does), so
an operator run with it cannot authenticate; this one can, as the admin or the restricted user.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from kopf_outcomes.cluster import ClusterInfo

if TYPE_CHECKING:
    import kopf


def operator_registry(cluster: ClusterInfo,
                      user: Literal["admin", "restricted"] = "admin") -> kopf.OperatorRegistry:
    """A new registry whose operator authenticates to ``cluster`` as ``user``."""
    import kopf  # imported on use: the pytest plugin must stay light to load

    registry = kopf.OperatorRegistry()
    token = cluster.admin_token if user == "admin" else cluster.restricted_token

    @kopf.on.login(registry=registry)
    def login_to_local_cluster(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=cluster.server, ca_path=str(cluster.ca_path),
                                   scheme="Bearer", token=token)

    return registry
