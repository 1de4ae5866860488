"""Kopf registries for in-process operators that log in to the local control plane.

A fresh ``kopf.OperatorRegistry()`` has no login handlers (only the default registry does), so
an operator run with it cannot authenticate; this one can, as the admin or the restricted user.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from kopf_outcomes_testing.cluster import ClusterInfo

if TYPE_CHECKING:
    import kopf


def operator_registry(cluster: ClusterInfo,
                      user: Literal["admin", "restricted"] = "admin") -> kopf.OperatorRegistry:
    """A new registry whose operator authenticates to ``cluster`` as ``user``."""
    import kopf  # imported on use: the pytest plugin must stay light to load

    registry = kopf.OperatorRegistry()
    if user == "admin":
        token, cert, key = cluster.admin_token, cluster.client_cert, cluster.client_key
    elif cluster.restricted_token is not None:
        token, cert, key = cluster.restricted_token, None, None
    else:
        raise ValueError(f"the cluster at {cluster.server} has no restricted user of ours")

    @kopf.on.login(registry=registry)
    def login_to_local_cluster(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(
            server=cluster.server, ca_path=None if cluster.ca_path is None else str(cluster.ca_path),
            scheme="Bearer" if token is not None else None, token=token,
            certificate_path=None if cert is None else str(cert),
            private_key_path=None if key is None else str(key))

    return registry
