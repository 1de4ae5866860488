"""
The observers of outcomes, called directly: one plain function that calls each implementation
of ``kopf_outcomes_observe_outcome`` in pluggy's order, with the arguments it names, the first
failure ending the call (as pluggy's own call does). Pluggy's dispatch (its hook caller, its
``_multicall`` loop, the arguments gathered by name for each implementation) cost more per run
than five trivial observers themselves; this costs one call, then the observers' own.
"""
from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

import pluggy

from kopf_outcomes.outcomes import Outcome
from kopf_outcomes.runs import HandlerRun

Observe = Callable[[HandlerRun, Outcome, MutableMapping[str, Any]], None]
ARGUMENTS = ("run", "outcome", "patch")  # the hook's, in the spec's order


def direct_caller(caller: pluggy.HookCaller) -> Observe | None:
    """The implementations as one function of the hook's arguments; None if one needs pluggy's
    machinery (a wrapper, or arguments with defaults) or names an argument the hook has not."""
    impls = list(reversed(caller.get_hookimpls()))  # pluggy calls the last registered first
    if any(impl.hookwrapper or impl.wrapper or getattr(impl, "kwargnames", ())
           or not set(impl.argnames) <= set(ARGUMENTS) for impl in impls):
        return None
    # Straight-line code, one line per implementation: no loop, no arguments gathered by name.
    # Only the hook's own argument names go into it (checked above), so it says nothing else.
    names = {f"observer_{index}": impl.function for index, impl in enumerate(impls)}
    lines = [f"    {name}({', '.join(impl.argnames)})" for name, impl in zip(names, impls, strict=True)]
    source = f"def observe_outcome({', '.join(ARGUMENTS)}):\n" + "\n".join(lines or ["    pass"]) + "\n"
    namespace: dict[str, Any] = dict(names)
    exec(compile(source, "<kopf_outcomes observers>", "exec"), namespace)  # noqa: S102
    observe: Observe = namespace["observe_outcome"]
    return observe
