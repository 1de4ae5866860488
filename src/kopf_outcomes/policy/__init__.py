"""
Declarative outcome policies: what exceptions mean, how retries back off and escalate,
and handler options — per handler id, per resource, and for the whole operator.

A policy is one more pluggy plugin (:class:`PolicyPlugin`); ``kopf_outcomes.install(policy=...)``
registers it. See ``docs/policies.md`` for the TOML reference.
"""
from kopf_outcomes.policy.errors import PolicyError
from kopf_outcomes.policy.loading import load_policy, loads_policy
from kopf_outcomes.policy.model import Backoff, Escalation, ExceptionRule, Levels, Policy, Scope
from kopf_outcomes.policy.plugin import PolicyPlugin

__all__ = [
    "Backoff",
    "Escalation",
    "ExceptionRule",
    "Levels",
    "Policy",
    "PolicyError",
    "PolicyPlugin",
    "Scope",
    "load_policy",
    "loads_policy",
]
