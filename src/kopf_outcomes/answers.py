"""
Answers of the wrong type, and whose they are: pluggy returns a hook's answers without saying
which plugin gave which, and the check of their types runs in the manager's or the engine's own
frame, where no plugin's code is to be found. Only after a wrong answer was seen, the
implementations are asked again one by one, to name the one that gave it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

from kopf_outcomes import builtin
from kopf_outcomes.options import HandlerOptions


class WrongAnswerError(TypeError):
    """A plugin's hook answered with a value of the wrong type; ``culprit`` names the plugin."""

    def __init__(self, culprit: str, message: str) -> None:
        super().__init__(message)
        self.culprit = culprit


def not_options(answer: object) -> bool:
    return answer is not None and not isinstance(answer, HandlerOptions)


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


def wrong_answerer(plugins: pluggy.PluginManager, hook_name: str, wrong: Callable[[object], bool],
                   **kwargs: object) -> str:
    """
    The plugins whose implementation of an informing hook (cached, called once) answers
    wrongly: only after a wrong answer was seen, each implementation is asked again on its own.
    If none answers wrongly again, every plugin implementing the hook is named.
    """
    impls = [impl for impl in getattr(plugins.hook, hook_name).get_hookimpls() if impl.plugin is not builtin]
    names = []
    for impl in impls:
        try:
            if wrong(impl.function(*[kwargs[name] for name in impl.argnames])):
                names.append(plugins.get_name(impl.plugin) or "?")
        except Exception:  # one that raises now is not the one that answered wrongly: go on
            continue
    return " or ".join(names or [plugins.get_name(impl.plugin) or "?" for impl in impls]) or "unknown plugin"


def first_answerer(plugins: pluggy.PluginManager, hook_name: str, **kwargs: object) -> str:
    """
    The plugin whose answer a first-result hook returned: the first, in pluggy's order, that
    answers something other than None when asked again on its own. If none does so again, every
    plugin implementing the hook is named.
    """
    impls = [impl for impl in getattr(plugins.hook, hook_name).get_hookimpls() if impl.plugin is not builtin]
    for impl in reversed(impls):  # pluggy calls them back to front
        if impl.wrapper or impl.hookwrapper:
            continue  # a wrapper passes the answer on; it is not the one that gave it
        try:
            if impl.function(*[kwargs[name] for name in impl.argnames]) is not None:
                return plugins.get_name(impl.plugin) or "?"
        except Exception:  # one that raises now did not answer then: go on
            continue
    return " or ".join(plugins.get_name(impl.plugin) or "?" for impl in impls) or "unknown plugin"
