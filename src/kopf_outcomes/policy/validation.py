"""
Checks of a policy model that the types alone cannot express: numbers in range, names that
import, combinations that mean nothing. The same checks run for TOML and Python policies.
"""
from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterator, Mapping

from kopf_outcomes import paths, values
from kopf_outcomes.outcomes import Outcome
from kopf_outcomes.policy.errors import KeyPath, Problem
from kopf_outcomes.policy.model import (
    OUTCOME_NAMES,
    Backoff,
    Escalation,
    ExceptionRule,
    Levels,
    Policy,
    Scope,
)


def check_exception_name(name: str) -> list[str]:
    """The parts of a dotted class name; ValueError if it cannot be one. Imports nothing."""
    parts = name.split(".")
    if len(parts) < 2 or not all(part.isidentifier() for part in parts):
        raise ValueError('expected the dotted name of an exception class, such as '
                         '"kopf.TemporaryError" or "builtins.TimeoutError"')
    return parts


IMPORT_FAILURE = "cannot import"  # how a module that is not found is said (the CLI adds where it looked)


def resolve_exception(name: str) -> type[Exception]:
    """
    The exception class a dotted name stands for; ValueError saying why if none.

    This imports the modules the name names, and so runs their top-level code, as ``import``
    would: a policy file is code-adjacent configuration, to be trusted as the operator's code is.
    ``check-policy --no-import`` checks the names without importing them.
    """
    parts = check_exception_name(name)
    failure = f"no module {parts[0]!r}"
    for split in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:split])
        try:
            found: object = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name is not None and (module_name + ".").startswith(e.name + "."):
                failure = f"{IMPORT_FAILURE} {e.name!r} ({e})"  # not a module: try a shorter one
                continue
            raise ValueError(f"importing {module_name!r} failed: {e}") from e
        except (Exception, SystemExit) as e:  # a module that exits at import (a __main__) is a problem too
            raise ValueError(f"importing {module_name!r} failed: {type(e).__name__}: {e}") from e
        for attribute in parts[split:]:
            if not hasattr(found, attribute):
                raise ValueError(f"{module_name!r} has no attribute {'.'.join(parts[split:])!r}")
            found = getattr(found, attribute)
        if not isinstance(found, type) or not issubclass(found, Exception):
            raise ValueError(f"{name} is not an exception class")
        if issubclass(found, Outcome):
            raise ValueError(f"{name} is an outcome, not an error: an outcome that a handler "
                             f"returns or raises is its own decision, rules do not match it")
        return found
    raise ValueError(failure)


def check(policy: Policy, *, import_names: bool = True) -> list[Problem]:
    """Every problem in the policy, with key paths as a TOML file would spell them.

    Without ``import_names``, exception names are checked for their form only, nothing is imported.
    """
    problems = list(_scope(policy.defaults, (), import_names))
    for section, scopes in (("handlers", policy.handlers), ("resources", policy.resources)):
        for name, scope in scopes.items():
            if not name.strip() or name != name.strip():
                problems.append(Problem((section, name), "must be a non-empty name without "
                                                         "surrounding spaces"))
            problems.extend(_scope(scope, (section, name), import_names))
    return problems


def _scope(scope: Scope, path: KeyPath, import_names: bool) -> Iterator[Problem]:
    for name in ("depends_on", "ignore"):
        for index, field in enumerate(getattr(scope, name) or ()):
            try:
                paths.parse(field)
            except ValueError:
                yield Problem((*path, name, index), f'must be a field path such as "spec.size", got {field!r}')
    yield from _value_rule(values.fatal_on_delete, scope.fatal_on_delete, (*path, "fatal_on_delete"))
    yield from _levels(scope.levels, (*path, "levels"))
    yield from _timing(scope.delay, scope.backoff, path)
    yield from _escalate(scope.escalate, (*path, "escalate"))
    yield from _exceptions(scope.exceptions, (*path, "exceptions"), import_names)


def _exceptions(rules: Mapping[str, ExceptionRule], path: KeyPath, import_names: bool) -> Iterator[Problem]:
    seen: dict[type[Exception] | str, str] = {}
    for name, rule in rules.items():
        try:
            cls: type[Exception] | str = resolve_exception(name) if import_names else ".".join(
                check_exception_name(name))
        except ValueError as e:
            yield Problem((*path, name), str(e))
        else:
            if cls in seen:
                yield Problem((*path, name), f"names the same class as {seen[cls]!r}: keep one")
            seen.setdefault(cls, name)
        yield from _rule(rule, (*path, name))


def _rule(rule: ExceptionRule, path: KeyPath) -> Iterator[Problem]:
    if rule.outcome is not None and rule.outcome not in OUTCOME_NAMES:
        yield Problem((*path, "outcome"), f"must be one of {', '.join(OUTCOME_NAMES)}; "
                                          f"got {rule.outcome!r}")
    yield from _level(rule.level, (*path, "level"))
    yield from _timing(rule.delay, rule.backoff, path)
    yield from _escalate(rule.escalate, (*path, "escalate"))
    unused = {
        "success": ("level", "delay", "backoff", "escalate"),
        "pending": ("level", "backoff"),
        "fatal": ("delay", "backoff", "escalate"),
    }.get(rule.outcome or "", ())
    for name in unused:
        if getattr(rule, name) is not None:
            why = (" (Pending is logged at INFO when it begins, DEBUG while unchanged)"
                   if name == "level" and rule.outcome == "pending" else "")
            yield Problem((*path, name), f'does not apply to outcome "{rule.outcome}"{why}')


def _levels(levels: Levels, path: KeyPath) -> Iterator[Problem]:
    yield from _level(levels.retry, (*path, "retry"))
    yield from _level(levels.fatal, (*path, "fatal"))


def _level(level: int | None, path: KeyPath) -> Iterator[Problem]:
    yield from _value_rule(values.level, level, path)


def _value_rule(rule: Callable[[object], object], value: object, path: KeyPath) -> Iterator[Problem]:
    """A value rule of :mod:`kopf_outcomes.values`, as the outcomes apply it at run time."""
    if value is None:
        return
    try:
        rule(value)
    except (TypeError, ValueError) as e:
        yield Problem(path, str(e))


def _timing(delay: float | None, backoff: Backoff | None, path: KeyPath) -> Iterator[Problem]:
    yield from _seconds(delay, (*path, "delay"))
    if backoff is None:
        return
    if delay is not None:
        yield Problem((*path, "backoff"), "set either delay (fixed) or backoff (exponential), "
                                          "not both")
    yield from _seconds(backoff.base, (*path, "backoff", "base"))
    yield from _seconds(backoff.cap, (*path, "backoff", "cap"))
    if not (math.isfinite(backoff.factor) and backoff.factor >= 1):
        yield Problem((*path, "backoff", "factor"),
                      f"must be a number of at least 1, got {values.show(backoff.factor)}")
    if not 0 <= backoff.jitter <= 1:
        yield Problem((*path, "backoff", "jitter"),
                      f"must be a fraction from 0 to 1, got {values.show(backoff.jitter)}")


def _seconds(value: float | None, path: KeyPath) -> Iterator[Problem]:
    yield from _value_rule(values.seconds, value, path)


def _escalate(steps: tuple[Escalation, ...] | None, path: KeyPath) -> Iterator[Problem]:
    for index, step in enumerate(steps or ()):
        yield from escalation_step(step, (*path, index))


def escalation_step(step: Escalation, here: KeyPath) -> Iterator[Problem]:
    """The problems of one step; the TOML reader calls it too, with each step's own index."""
    if (step.after_tries is None) == (step.after_seconds is None):
        yield Problem(here, "set exactly one of after_tries or after_seconds")
    if step.after_tries is not None and step.after_tries < 1:
        yield Problem((*here, "after_tries"),
                      f"must be a whole number of at least 1, got {values.show(step.after_tries)}")
    yield from _value_rule(values.threshold_seconds, step.after_seconds, (*here, "after_seconds"))
    if step.level is None and step.outcome is None:
        yield Problem(here, 'set level, or outcome = "fatal", or both')
    yield from _level(step.level, (*here, "level"))
    if step.outcome not in (None, "fatal"):
        yield Problem((*here, "outcome"), f'must be "fatal", got {step.outcome!r}')

