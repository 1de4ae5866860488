"""
What plugins' answers must look like, and whose a wrong one is: pluggy returns a first-result
hook's answer without saying which plugin gave it, and the check of its type runs in the engine's
own frame, where no plugin's code is to be found. Only after a wrong answer was seen, the
implementations are asked again one by one, to name the one that gives it. (The informing hooks
are asked one plugin at a time in the first place: :meth:`PluginManager.answers`.)
"""
from __future__ import annotations

import dataclasses
from typing import Any

import pluggy

from kopf_outcomes import builtin
from kopf_outcomes.options import HandlerOptions

UNKNOWN = "unknown plugin"


def not_options(answer: object) -> bool:
    return answer is not None and not isinstance(answer, HandlerOptions)


def rechecked(answer: object) -> object:
    """Options checked again as they are now (a plugin may have changed a frozen answer past its
    check, or kept it and changed it later); anything else as it is, to be refused."""
    return dataclasses.replace(answer) if isinstance(answer, HandlerOptions) else answer


def listed(answer: Any) -> object:
    """An owned_fields answer as a list, once (it may be a generator); a string or a
    non-iterable as it is, to be refused (a string would be taken letter by letter)."""
    try:
        return answer if isinstance(answer, (str, bytes)) else list(answer)
    except TypeError:
        return answer


def not_field_paths(answer: object) -> bool:
    as_list = listed(answer)
    return not isinstance(as_list, list) or not all(isinstance(field, str) for field in as_list)


def first_answerer(plugins: pluggy.PluginManager, hook_name: str, wrong: object, **kwargs: object) -> str:
    """
    The plugin whose ``wrong`` answer a first-result hook returned: the first, in pluggy's order,
    that answers a value of the same type when asked again on its own. One that answers well (or
    None) now is not blamed for another's answer: if none answers so again, the plugin is unknown.
    """
    impls = [impl for impl in getattr(plugins.hook, hook_name).get_hookimpls() if impl.plugin is not builtin]
    for impl in reversed(impls):  # pluggy calls them back to front
        if impl.wrapper or impl.hookwrapper:
            continue  # a wrapper passes the answer on; it is not the one that gave it
        try:
            again = impl.function(*[kwargs[name] for name in impl.argnames])
        except Exception:  # one that raises now did not answer then: go on
            continue
        if again is not None:
            return plugins.get_name(impl.plugin) or "?" if type(again) is type(wrong) else UNKNOWN
    return UNKNOWN
