"""How to reach a cluster: the local control plane's access data, or an existing cluster's."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kopf_outcomes_testing.cluster.api import RestClient
from kopf_outcomes_testing.cluster.errors import ClusterError

AUDIT_LOG = "audit.log"


@dataclass(frozen=True)
class ClusterInfo:
    """How to reach a running cluster, as admin or as the restricted user.

    The local control plane fills every field. A cluster given by a kubeconfig
    (``--kopf-outcomes-kubeconfig``) has no restricted user and no state folder (so no audit
    log): those fields are None, and it may authenticate with a client certificate.
    """

    server: str
    ca_path: Path | None
    admin_token: str | None
    restricted_token: str | None
    admin_kubeconfig: Path
    restricted_kubeconfig: Path | None
    state_dir: Path | None
    client_cert: Path | None = None
    client_key: Path | None = None

    @property
    def audit_log(self) -> Path:
        """The API server's audit log of writes (JSON lines); read it with ``cluster.audit``."""
        if self.state_dir is None:
            raise ClusterError(f"the cluster at {self.server} has no audit log that we can read",
                               "counting writes needs the local control plane (kopf-outcomes cluster up)")
        return self.state_dir / AUDIT_LOG

    def admin_client(self) -> RestClient:
        return RestClient(self.server, self.ca_path, self.admin_token,
                          client_cert=self.client_cert, client_key=self.client_key)

    def restricted_client(self) -> RestClient:
        if self.restricted_token is None:
            raise ClusterError(f"the cluster at {self.server} has no restricted user of ours",
                               "the restricted user exists on the local control plane only")
        return RestClient(self.server, self.ca_path, self.restricted_token)
