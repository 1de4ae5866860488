"""
The plugin manager: pluggy's, plus what the engine needs to call it cheaply on every handler run.

Plugins are found in the entry-point group ``kopf_outcomes``. ``allow`` (if given) names
the only entry points to load; ``deny`` names those never to load. The environment
variables ``KOPF_OUTCOMES_PLUGINS`` and ``KOPF_OUTCOMES_DISABLE_PLUGINS`` (comma-separated
entry-point names) do the same for operators started by ``kopf run``.

A plugin is refused at registration, with its name, if it implements a hook that does not exist,
takes a parameter its hook does not pass, or implements one as ``async def``: hooks run inside
Kopf's event loop and must be quick and synchronous (:mod:`kopf_outcomes.refusals`).
"""
from __future__ import annotations

import os
import types
from collections.abc import Callable, Iterable, MutableMapping
from importlib import metadata
from typing import Any, cast

import pluggy

from kopf_outcomes import answers, builtin, hookspecs, observers, refusals
from kopf_outcomes.errors import PluginError
from kopf_outcomes.options import HandlerOptions, unread
from kopf_outcomes.outcomes import Outcome
from kopf_outcomes.runs import HandlerRun, ResourceRef

ENTRY_POINT_GROUP = "kopf_outcomes"
BUILTIN_NAME = "kopf_outcomes.builtin"


def _names_from_env(variable: str) -> set[str] | None:
    value = os.environ.get(variable)
    if value is None:
        return None
    return {name.strip() for name in value.split(",") if name.strip()}


class PluginManager(pluggy.PluginManager):
    """pluggy's manager for the ``kopf_outcomes`` hooks, with the built-ins registered."""

    def __init__(self) -> None:
        super().__init__(hookspecs.PROJECT_NAME)
        self.add_hookspecs(hookspecs)
        self._options: dict[tuple[str, ResourceRef | None], HandlerOptions] = {}
        self._owned_fields: tuple[str, ...] | None = None
        # Per handler whose options a plugin failed to give: the logger (Kopf's, one per cycle) told so.
        self.unread_told: dict[tuple[str, ResourceRef | None], object] = {}
        self._monitored = False  # pluggy's call monitoring (or tracing) sees every hook call
        self.observe_outcome: observers.Observe = self._observe_through_pluggy
        self.register(builtin, name=BUILTIN_NAME)

    def get_canonical_name(self, plugin: object) -> str:
        """A name a person can read in logs: a module's name, or a class's (pluggy's is an id)."""
        if isinstance(plugin, types.ModuleType):
            return plugin.__name__
        cls = plugin if isinstance(plugin, type) else type(plugin)
        base = f"{cls.__module__}.{cls.__qualname__}"
        name, number = base, 1
        while self.has_plugin(name) and self.get_plugin(name) is not plugin:
            number += 1
            name = f"{base}#{number}"
        return name

    def register(self, plugin: object, name: str | None = None) -> str | None:
        """Register a plugin; one that cannot be used is a PluginError naming it, and nothing of
        it is registered (:mod:`kopf_outcomes.refusals`). A plugin already registered (found
        through its entry point and also given to ``install(plugins=...)``, or given twice) stays
        registered once, under its first name; another plugin under a name already taken is a
        PluginError."""
        if self.is_registered(plugin):
            return self.get_name(plugin)
        named = name or self.get_canonical_name(plugin)
        for problem in () if self.is_blocked(named) else refusals.problems(self, plugin, named):
            raise problem  # (a blocked name is not registered at all: pluggy returns None)
        if self.has_plugin(named):
            raise PluginError(f"kopf-outcomes plugin {named!r} cannot be used: another plugin is registered under "
                              f"that name ({self.get_plugin(named)!r}); register this one under a name of its own")
        try:
            registered = super().register(plugin, name=name)
        except pluggy.PluginValidationError as e:  # a reason refusals does not know: still named
            if self.is_registered(plugin):
                self.unregister(plugin)
            reason = "; ".join(line.strip() for line in str(e).splitlines() if line.strip())  # one line
            raise PluginError(f"kopf-outcomes plugin {named!r} cannot be used: {reason}") from None
        self._refresh()
        return registered

    def unregister(self, plugin: object | None = None, name: str | None = None) -> object | None:
        removed = super().unregister(plugin, name=name)
        self._refresh()
        return removed

    def replace(self, plugin: object, name: str) -> None:
        """Register ``plugin`` under ``name``, replacing the one registered there before."""
        if self.has_plugin(name):
            self.unregister(name=name)
        self.register(plugin, name=name)

    def load_entry_points(
        self, *, allow: Iterable[str] | None = None, deny: Iterable[str] = (),
        broken: dict[str, PluginError] | None = None,
    ) -> list[str]:
        """Load the installed plugins; return the names loaded. A broken one is a PluginError,
        or, if ``broken`` is given, put there by its name while the others load (for listings)."""
        allowed = set(allow) if allow is not None else _names_from_env("KOPF_OUTCOMES_PLUGINS")
        denied = set(deny) | (_names_from_env("KOPF_OUTCOMES_DISABLE_PLUGINS") or set())
        loaded: list[str] = []
        for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
            name = entry_point.name
            if name in denied or (allowed is not None and name not in allowed):
                continue
            if self.has_plugin(name) or self.is_blocked(name):
                continue
            try:
                try:
                    plugin = entry_point.load()
                except Exception as e:
                    raise PluginError(
                        f"kopf-outcomes plugin {name!r} ({entry_point.value}) failed to load: "
                        f"{type(e).__name__}: {e}"
                    ) from e
                self.register(plugin, name=name)
            except PluginError as e:
                if broken is None:
                    raise
                broken[name] = e
                continue
            loaded.append(name)
        return loaded

    def _refresh(self) -> None:
        """Recompute what the hot path checks, after any (un)registration."""
        hook = self.hook
        if not hasattr(hook, "kopf_outcomes_observe_outcome"):
            return  # pluggy registers nothing before the specs are added
        self._options.clear()
        self._owned_fields = None
        self.provides_options = bool(hook.kopf_outcomes_handler_options.get_hookimpls())
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
        self.observes_gone = bool(hook.kopf_outcomes_object_gone.get_hookimpls())
        self._refresh_observers()
        # The classification without the built-ins: "did any plugin decide?" is then a None check.
        self.classify_result_by_plugins = self.subset_hook_caller("kopf_outcomes_classify_result", [builtin])
        self.classify_exception_by_plugins = self.subset_hook_caller(
            "kopf_outcomes_classify_exception", [builtin])

    def _refresh_observers(self) -> None:
        """``observe_outcome(run, outcome, patch)`` calls the observers as pluggy does: in its
        order, each with the arguments it names, the first failure ending the call. Plain
        implementations are called directly (:mod:`.observers`); wrappers, and pluggy's call
        monitoring or tracing, go through pluggy itself."""
        direct = None if self._monitored else observers.direct_caller(self.hook.kopf_outcomes_observe_outcome)
        self.observe_outcome = direct if direct is not None else self._observe_through_pluggy

    def _observe_through_pluggy(self, run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]) -> None:
        self.hook.kopf_outcomes_observe_outcome(run=run, outcome=outcome, patch=patch)

    def add_hookcall_monitoring(self, before: Any, after: Any) -> Callable[[], None]:
        """Pluggy's call monitoring (its tracing uses it): the observers go through pluggy while
        it is on, so that it sees them."""
        undo = super().add_hookcall_monitoring(before, after)
        self._monitored = True
        self._refresh_observers()

        def undo_monitoring() -> None:
            undo()
            self._monitored = False
            self._refresh_observers()
        return undo_monitoring

    def options(self, handler_id: str, resource: ResourceRef | None) -> HandlerOptions:
        """
        All plugins' options for a handler, merged (the first to set a field wins), cached. Never
        raises: a plugin that raises or answers wrongly is left out, and only that plugin; the
        others' options (the policy's among them) stand, marked as :class:`UnreadOptions` naming
        it, and not cached (it may answer well next time).
        """
        key = (handler_id, resource)
        try:
            return self._options[key]
        except KeyError:
            pass
        failures: list[str] = []
        merged = HandlerOptions()
        for answer in self.answers("kopf_outcomes_handler_options", answers.not_options, "HandlerOptions or None",
                                   failures, answers.rechecked, handler_id=handler_id, resource=resource):
            merged = merged.merged(cast(HandlerOptions, answer))
        if failures:
            return unread(merged, failures)
        self._options[key] = merged
        return merged

    def owned_fields(self, failures: list[str] | None = None) -> tuple[str, ...]:
        """The field paths plugins write, cached. A plugin that raises or answers wrongly is left
        out (only it), named in ``failures``, and nothing is cached (it may answer well next time)."""
        if self._owned_fields is None:
            failures = failures if failures is not None else []
            found = self.answers("kopf_outcomes_owned_fields", answers.not_field_paths,
                                 "field paths such as ['status.conditions']", failures, answers.listed)
            fields = tuple(field for answer in found for field in cast(list[str], answer))
            if failures:
                return fields
            self._owned_fields = fields
        return self._owned_fields

    def answers(self, hook_name: str, wrong: Callable[[object], bool], expected: str, failures: list[str],
                shaped: Callable[[object], object] = lambda answer: answer, **kwargs: object) -> list[object]:
        """
        An informing hook's answers (each ``shaped``; None is pluggy's "no answer": left out), in
        pluggy's order, each plugin asked on its own, so that a failure is the failing plugin's
        alone: it is left out and named in ``failures`` (one line each). Wrappers, or pluggy's call
        monitoring, need pluggy's own call: the whole call, and only where that fails, each plugin
        on its own; the wrappers cannot be asked so, and what they would add is then missing too.
        """
        caller = getattr(self.hook, hook_name)
        impls = caller.get_hookimpls()
        wrappers = [self.get_name(impl.plugin) or "?" for impl in impls if impl.wrapper or impl.hookwrapper]
        if self._monitored or wrappers:
            try:
                found = [shaped(answer) for answer in caller(**kwargs)]
                wrongly = [answer for answer in found if wrong(answer)]
                if not wrongly:
                    return found
                failed = f"it answered {wrongly[0]!r}, expected {expected}"
            except BaseException as e:  # noqa: B036 -- asked again one by one, to name the plugin
                failed = f"{type(e).__name__}: {e}"
            if wrappers:
                failures.append(f"plugin {' or '.join(map(repr, wrappers))} (a hook wrapper) failed in "
                                f"{hook_name}, or a plugin it wraps did: {failed}; what it adds is left out")
        found = []
        for impl in reversed(impls):  # pluggy's order: the last registered first
            if impl.wrapper or impl.hookwrapper:
                continue
            name = self.get_name(impl.plugin) or "?"
            try:
                answer = impl.function(*[kwargs[argument] for argument in impl.argnames])
                if answer is None:
                    continue
                answer = shaped(answer)
            except BaseException as e:  # noqa: B036 -- a plugin's fault is contained where it is called
                failures.append(f"plugin {name!r} failed in {hook_name}: {type(e).__name__}: {e}")
                continue
            if wrong(answer):
                failures.append(f"plugin {name!r} failed in {hook_name}: it answered {answer!r}, expected {expected}")
                continue
            found.append(answer)
        return found

    def culprit(self, error: BaseException) -> str:
        """Name the plugin whose hook implementation raised ``error`` (from its traceback)."""
        codes: dict[types.CodeType, str] = {}
        for name, plugin in self.list_name_plugin():
            for caller in self.get_hookcallers(plugin) or ():
                for impl in caller.get_hookimpls():
                    code = getattr(impl.function, "__code__", None)
                    if impl.plugin is plugin and code is not None:
                        codes[code] = name
        traceback = error.__traceback__
        culprit = "unknown plugin"
        while traceback is not None:
            culprit = codes.get(traceback.tb_frame.f_code, culprit)
            traceback = traceback.tb_next
        return culprit

    def implementers(self, hook_name: str) -> list[str]:
        """The names of the plugins (not the built-ins) that implement a hook."""
        caller = getattr(self.hook, hook_name)
        return [self.get_name(impl.plugin) or "?" for impl in caller.get_hookimpls() if impl.plugin is not builtin]
