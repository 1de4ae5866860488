"""
Why a plugin cannot be used, found before pluggy registers any of it: each reason is a
:class:`~kopf_outcomes.errors.PluginError` that names the plugin, the function with its file and
line (with the typed markers of :mod:`kopf_outcomes.hooks` it may have any name), the hook it is
marked for, and what is allowed: the nearest hook's name, or the parameters the hook passes.
pluggy would stop at its first problem with an error of its own, and register half a plugin.
"""
from __future__ import annotations

import difflib
import inspect
import os
from collections.abc import Iterator, Sequence

import pluggy

from kopf_outcomes.errors import PluginError


def problems(manager: pluggy.PluginManager, plugin: object, name: str) -> Iterator[PluginError]:
    """Every reason why ``plugin`` (to be registered as ``name``) cannot be used, one per hook."""
    specs = {hook_name: tuple(caller.spec.argnames) for hook_name, caller in vars(manager.hook).items()
             if not hook_name.startswith("_") and caller.spec is not None}
    for attribute in dir(plugin):
        opts = manager.parse_hookimpl_opts(plugin, attribute)
        if opts is None:
            continue
        function = getattr(plugin, attribute)
        hook_name = opts.get("specname") or attribute
        if hook_name not in specs and not opts.get("optionalhook"):
            yield unknown_hook(name, attribute, hook_name, list(specs), location(function))
            continue
        if hook_name not in specs:
            continue
        impl = pluggy.HookImpl(plugin, name, function, opts)
        unknown = [argument for argument in impl.argnames if argument not in specs[hook_name]]
        its = f"its function {attribute!r} ({location(function)})"
        if unknown:
            yield unknown_parameters(name, hook_name, unknown, specs[hook_name], its)
        elif inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
            yield asynchronous(name, hook_name, its)


def location(function: object) -> str:
    """Where a function is defined, as ``file:line`` (the file relative to the current folder
    where it is in it): what a person opens to fix it."""
    plain = getattr(function, "__func__", function)  # a method's function
    code = getattr(inspect.unwrap(plain) if callable(plain) else plain, "__code__", None)
    if code is None:
        return "defined where Python cannot tell"
    path = code.co_filename
    try:
        relative = os.path.relpath(path)
        path = path if relative.startswith(os.pardir) else relative
    except ValueError:  # another drive
        pass
    return f"{path}:{code.co_firstlineno}"


def unknown_hook(plugin: str, attribute: str, hook_name: str, hooks: Sequence[str], where: str) -> PluginError:
    implemented = f"its function {attribute!r} ({where}" + (f", specname {hook_name!r})" if attribute != hook_name
                                                           else ")")
    nearest = _nearest(hook_name, hooks)
    allowed = (f"did you mean {nearest[0]!r}?" if nearest
               else f"the hooks are {', '.join(sorted(hooks))}")
    return PluginError(f"kopf-outcomes plugin {plugin!r} cannot be used: {implemented} is marked as a hook "
                       f"implementation, but there is no hook {hook_name!r} ({allowed})")


def _nearest(hook_name: str, hooks: Sequence[str]) -> list[str]:
    """The closest hook, compared without the project's prefix that all of them share (which made
    any name that starts with it look close to some hook)."""
    prefix = os.path.commonprefix(list(hooks))
    bare = {name[len(prefix):]: name for name in hooks}
    wanted = hook_name[len(prefix):] if hook_name.startswith(prefix) else hook_name
    return [bare[name] for name in difflib.get_close_matches(wanted, list(bare), n=1)]


def unknown_parameters(plugin: str, hook_name: str, unknown: Sequence[str], passed: Sequence[str],
                       its: str) -> PluginError:
    names = ", ".join(repr(argument) for argument in unknown)
    allowed = ", ".join(passed) if passed else "nothing"
    return PluginError(f"kopf-outcomes plugin {plugin!r} cannot be used: {its}, marked as {hook_name}, takes "
                       f"{names}, which the hook does not pass; it passes {allowed} (take any of them, by these "
                       f"names)")


def asynchronous(plugin: str, hook_name: str, its: str) -> PluginError:
    return PluginError(f"kopf-outcomes plugin {plugin!r}: {its} implements {hook_name} as 'async def'; hooks run "
                       f"inside Kopf's event loop and must be plain, quick functions. Do slow work "
                       f"elsewhere (a Kopf daemon, a thread, a queue the hook only appends to).")

