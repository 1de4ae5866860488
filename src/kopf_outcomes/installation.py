"""
Installing kopf-outcomes into Kopf, process-wide, and what the process holds while it is installed.

``install()`` checks Kopf's version, builds the plugin manager (entry points, policy, plugins
given in code), and puts the wrappers of :mod:`kopf_outcomes._kopf` into Kopf; ``uninstall()``
puts Kopf's own functions back. Both are idempotent.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kopf_outcomes import _kopf, misuse, uncaught
from kopf_outcomes import events as outcome_events
from kopf_outcomes.errors import NotInstalledError, PluginError
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.memory import Memory

if TYPE_CHECKING:
    from kopf_outcomes.policy import Policy

_patch: _kopf.Wrappers | None = None


def install(
    *,
    plugins: Iterable[object] = (),
    entry_points: bool = True,
    allow: Iterable[str] | None = None,
    deny: Iterable[str] = (),
    policy: Policy | str | os.PathLike[str] | None = None,
    events: bool = True,
) -> PluginManager:
    """
    Patch Kopf process-wide. Idempotent: a second call only registers new ``plugins``.

    Installed plugins are discovered from the ``kopf_outcomes`` entry-point group unless
    ``entry_points`` is False; ``allow``/``deny`` filter them by entry-point name.
    ``policy`` is a :class:`~kopf_outcomes.policy.Policy`, or a path to a TOML policy file
    (or to a ``pyproject.toml`` with ``[tool.kopf-outcomes]``); without it, the file named by
    the environment variable ``KOPF_OUTCOMES_POLICY`` is used, if set. An invalid policy, an
    unsupported Kopf or an unusable plugin raises at once, before anything is patched.
    ``events``: post each conclusion as a Kubernetes Event with a reason of its own
    (see the Observability page); False (or ``KOPF_OUTCOMES_EVENTS=0``) leaves them to Kopf.
    """
    global _patch
    policy_plugin = _policy_plugin(policy)  # an invalid policy fails before anything is patched
    if _patch is None:
        _kopf.check_version()
        manager = PluginManager()
        try:
            if entry_points:
                manager.load_entry_points(allow=allow, deny=deny)
            # Pluggy asks the last registered first: the entry points', then the policy, then the
            # plugins given here are asked in turn, as docs/policies.md says (given plugins first).
            if policy_plugin is not None:
                manager.replace(policy_plugin, name=policy_plugin.name)
            for plugin in plugins:
                manager.register(plugin)
        except PluginError as e:
            uncaught.show_alone(e)  # `kopf run`: the reason, not Kopf's loader's traceback
            raise
        _patch = _kopf.Wrappers(manager)
        _patch.attach()
        misuse.installed(True)
        outcome_events.enable(events, series=_kopf.post_event)
        return manager
    outcome_events.enable(events, series=_kopf.post_event)
    manager = _patch.plugins
    if policy_plugin is not None:
        manager.replace(policy_plugin, name=policy_plugin.name)
    for plugin in plugins:
        if not manager.is_registered(plugin):
            try:
                manager.register(plugin)
            except PluginError as e:
                uncaught.show_alone(e)
                raise
    return manager


def _policy_plugin(policy: Policy | str | os.PathLike[str] | None) -> PolicyPluginLike | None:
    source = policy if policy is not None else os.environ.get("KOPF_OUTCOMES_POLICY") or None
    if source is None:
        return None
    from kopf_outcomes.policy import PolicyPlugin, load_policy

    return PolicyPlugin(load_policy(source))


if TYPE_CHECKING:
    from kopf_outcomes.policy import PolicyPlugin as PolicyPluginLike


def uninstall() -> None:
    """Restore Kopf exactly as it was. Idempotent."""
    global _patch
    if _patch is not None:
        _patch.detach()
        outcome_events.enable(False)
        _patch = None
        misuse.installed(False)


def is_installed() -> bool:
    """Whether kopf-outcomes is patched into Kopf now."""
    return _patch is not None


def plugin_manager() -> PluginManager:
    """The plugin manager of the current installation; NotInstalledError if there is none."""
    if _patch is None:
        raise NotInstalledError("kopf-outcomes is not installed: call kopf_outcomes.install() first")
    return _patch.plugins


def recall() -> Memory:
    """Inside a handler: what it remembers of its previous conclusion (see :class:`Memory`)."""
    return _kopf.current_memory(_patch.plugins if _patch is not None else None)
