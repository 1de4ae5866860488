"""Testing helpers for Kopf operators against the real local control plane.

The pytest fixtures (``k8s_cluster``, ``k8s_api``, ``k8s_restricted_api``, ``k8s_namespace``,
``kopf_operator``) are registered automatically through the ``pytest11`` entry point.
"""
from kopf_outcomes.testing.clients import api_client
from kopf_outcomes.testing.operators import operator_registry

__all__ = ["api_client", "operator_registry"]
