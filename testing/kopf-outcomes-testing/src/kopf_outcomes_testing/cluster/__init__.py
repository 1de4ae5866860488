"""A real local Kubernetes control plane (kube-apiserver + etcd on loopback), like envtest.

``ensure_running()`` returns a :class:`ClusterInfo` with the server URL, the CA, the tokens and
kubeconfig paths of an admin and of a restricted user; ``stop()`` takes the cluster down.
"""
from kopf_outcomes_testing.cluster.control_plane import ensure_running, running, stop
from kopf_outcomes_testing.cluster.errors import ClusterError
from kopf_outcomes_testing.cluster.info import ClusterInfo

__all__ = ["ClusterError", "ClusterInfo", "ensure_running", "running", "stop"]
