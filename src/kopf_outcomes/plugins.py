"""
The plugin manager: built-ins, entry-point discovery with allow/deny lists, containment.

Plugins are found in the entry-point group ``kopf_outcomes``. ``allow`` (if given) names
the only entry points to load; ``deny`` names those never to load. The environment
variables ``KOPF_OUTCOMES_PLUGINS`` and ``KOPF_OUTCOMES_DISABLE_PLUGINS`` (comma-separated
entry-point names) do the same for operators started by ``kopf run``.
"""
from __future__ import annotations

import os
import types
from collections.abc import Iterable
from importlib import metadata

import pluggy

from kopf_outcomes import builtin, hookspecs
from kopf_outcomes.options import HandlerOptions
from kopf_outcomes.runs import ResourceRef

ENTRY_POINT_GROUP = "kopf_outcomes"

hookimpl = hookspecs.hookimpl


class PluginError(Exception):
    """A plugin failed to load or raised in a hook; the message names the plugin."""


def _names_from_env(variable: str) -> set[str] | None:
    value = os.environ.get(variable)
    if value is None:
        return None
    return {name.strip() for name in value.split(",") if name.strip()}


class Plugins:
    """A pluggy manager plus what the engine needs to call it cheaply on every handler run."""

    def __init__(self) -> None:
        self.manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.manager.add_hookspecs(hookspecs)
        self.manager.register(builtin, name="kopf_outcomes.builtin")
        self._options: dict[tuple[str, ResourceRef | None], HandlerOptions] = {}
        self._owned_fields: tuple[str, ...] | None = None
        self._refresh()

    def register(self, plugin: object, name: str | None = None) -> None:
        self.manager.register(plugin, name=name)
        self._refresh()

    def replace(self, plugin: object, name: str) -> None:
        """Register ``plugin`` under ``name``, replacing the one registered there before."""
        if self.manager.has_plugin(name):
            self.manager.unregister(name=name)
        self.register(plugin, name=name)

    def unregister(self, name: str) -> None:
        self.manager.unregister(name=name)
        self._refresh()

    def load_entry_points(
        self, *, allow: Iterable[str] | None = None, deny: Iterable[str] = ()
    ) -> list[str]:
        """Load the installed plugins; return the names loaded. A broken one is a PluginError."""
        allowed = set(allow) if allow is not None else _names_from_env("KOPF_OUTCOMES_PLUGINS")
        denied = set(deny) | (_names_from_env("KOPF_OUTCOMES_DISABLE_PLUGINS") or set())
        loaded: list[str] = []
        for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
            name = entry_point.name
            if name in denied or (allowed is not None and name not in allowed):
                continue
            if self.manager.has_plugin(name) or self.manager.is_blocked(name):
                continue
            try:
                plugin = entry_point.load()
            except Exception as e:
                raise PluginError(
                    f"kopf-outcomes plugin {name!r} ({entry_point.value}) failed to load: "
                    f"{type(e).__name__}: {e}"
                ) from e
            self.register(plugin, name=name)
            loaded.append(name)
        return loaded

    def _refresh(self) -> None:
        """Recompute what the hot path checks, after any (un)registration."""
        hook = self.manager.hook
        self._options.clear()
        self._owned_fields = None
        self._provides_options = bool(hook.kopf_outcomes_handler_options.get_hookimpls())
        # Where only the built-ins decide, the engine skips pluggy and calls them directly;
        # observers alone do not change how a run is decided, only who is told about it.
        self.decides_builtin = all(
            impl.plugin is builtin
            for caller in (
                hook.kopf_outcomes_classify_result,
                hook.kopf_outcomes_classify_exception,
                hook.kopf_outcomes_adjust_outcome,
            )
            for impl in caller.get_hookimpls()
        )
        self.observed = bool(hook.kopf_outcomes_observe_outcome.get_hookimpls())
        self.observes_objects = bool(hook.kopf_outcomes_observe_object.get_hookimpls())
        self.only_builtins = self.decides_builtin and not self.observed

    @property
    def provides_options(self) -> bool:
        """Whether any plugin (e.g. a policy) answers ``kopf_outcomes_handler_options``."""
        return self._provides_options

    def options(self, handler_id: str, resource: ResourceRef | None) -> HandlerOptions:
        key = (handler_id, resource)
        try:
            return self._options[key]
        except KeyError:
            pass
        merged = HandlerOptions()
        answers = self.manager.hook.kopf_outcomes_handler_options(handler_id=handler_id, resource=resource)
        for answer in answers:
            merged = merged.merged(answer)
        self._options[key] = merged
        return merged

    def owned_fields(self) -> tuple[str, ...]:
        if self._owned_fields is None:
            answers = self.manager.hook.kopf_outcomes_owned_fields()
            self._owned_fields = tuple(field for answer in answers for field in answer)
        return self._owned_fields

    def culprit(self, error: BaseException) -> str:
        """Name the plugin whose hook implementation raised ``error`` (from its traceback)."""
        codes: dict[types.CodeType, str] = {}
        for name, plugin in self.manager.list_name_plugin():
            for caller in self.manager.get_hookcallers(plugin) or ():
                for impl in caller.get_hookimpls():
                    if impl.plugin is plugin:
                        codes[getattr(impl.function, "__code__", None)] = name  # type: ignore[index]
        traceback = error.__traceback__
        culprit = "unknown plugin"
        while traceback is not None:
            culprit = codes.get(traceback.tb_frame.f_code, culprit)
            traceback = traceback.tb_next
        return culprit
