"""
Which parts of a policy apply to one handler run, and where each comes from.

Precedence: the handler's scope, then the resource's scopes (the most specific name first),
then the top level. A setting comes from the first scope that sets it. An exception rule comes
from the first scope that has any rule matching the exception's class; within that scope,
the rule for the nearest class in the exception's MRO wins (the most specific one).
"""
from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from kopf_outcomes.options import OPTION_NAMES, HandlerOptions
from kopf_outcomes.outcomes import Outcome
from kopf_outcomes.policy.errors import KeyPath, PolicyError, dotted, render
from kopf_outcomes.policy.model import Backoff, Escalation, ExceptionRule, Policy, Scope
from kopf_outcomes.policy.validation import check, resolve_exception
from kopf_outcomes.runs import ResourceRef

T = TypeVar("T")

_OPTIONS = OPTION_NAMES


@dataclasses.dataclass(frozen=True)
class Setting(Generic[T]):
    """A value from the policy, and the dotted key it comes from (for explanations)."""

    value: T
    where: str


@dataclasses.dataclass(frozen=True)
class RuleMatch:
    """The exception rule that decides, and its dotted key."""

    name: str
    rule: ExceptionRule
    where: str


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything but the exception rules that applies to one handler of one resource."""

    options: HandlerOptions
    option_sources: dict[str, str]
    retry_level: Setting[int] | None
    fatal_level: Setting[int] | None
    timing: Setting[float | Backoff] | None  # a fixed delay, or an exponential backoff
    escalate: Setting[tuple[Escalation, ...]] | None


def resource_names(resource: ResourceRef) -> list[str]:
    """The names a resource scope can have, the most specific first."""
    plural, version, group = resource.plural, resource.version, resource.group
    if group:
        names = [f"{plural}.{version}.{group}", f"{plural}.{group}", plural]
    else:
        names = [f"{plural}.{version}", plural]
    if resource.kind:
        names.append(resource.kind)
    return names


class Resolver:
    """Answers "what applies here" for a checked policy, cached per handler and resource."""

    def __init__(self, policy: Policy) -> None:
        problems = check(policy)
        if problems:
            raise PolicyError("<Policy object>", render("<Policy object>", problems))
        self.policy = policy
        self._classes = {name: resolve_exception(name) for _, scope in self._all_scopes()
                         for name in scope.exceptions}
        self._settings: dict[tuple[str, ResourceRef | None], Settings] = {}
        self._matches: dict[tuple[str, ResourceRef | None, type], RuleMatch | None] = {}

    def _all_scopes(self) -> Iterator[tuple[KeyPath, Scope]]:
        yield (), self.policy.defaults
        for name, scope in self.policy.handlers.items():
            yield ("handlers", name), scope
        for name, scope in self.policy.resources.items():
            yield ("resources", name), scope

    def scopes(self, handler_id: str, resource: ResourceRef | None) -> list[tuple[KeyPath, Scope]]:
        """The scopes that apply, in precedence order: handler, resources, top level."""
        found: list[tuple[KeyPath, Scope]] = []
        if handler_id in self.policy.handlers:
            found.append((("handlers", handler_id), self.policy.handlers[handler_id]))
        for name in resource_names(resource) if resource is not None else ():
            if name in self.policy.resources:
                found.append((("resources", name), self.policy.resources[name]))
        found.append(((), self.policy.defaults))
        return found

    def settings(self, handler_id: str, resource: ResourceRef | None) -> Settings:
        key = (handler_id, resource)
        if key not in self._settings:
            self._settings[key] = self._resolve(self.scopes(handler_id, resource))
        return self._settings[key]

    def match(self, handler_id: str, resource: ResourceRef | None,
              cls: type[BaseException]) -> RuleMatch | None:
        """The rule for an exception class: the first scope with a match, the nearest class."""
        key = (handler_id, resource, cls)
        if key not in self._matches:
            self._matches[key] = self._match(self.scopes(handler_id, resource), cls)
        return self._matches[key]

    def escalation(self, handler_id: str, resource: ResourceRef | None,
                   origin: object) -> Setting[tuple[Escalation, ...]] | None:
        """The escalation steps: the deciding rule's own, else the scopes'."""
        if isinstance(origin, Exception) and not isinstance(origin, Outcome):
            found = self.match(handler_id, resource, type(origin))
            if found is not None and found.rule.escalate is not None:
                return Setting(found.rule.escalate, f"{found.where}.escalate")
        return self.settings(handler_id, resource).escalate

    def _match(self, scopes: list[tuple[KeyPath, Scope]], cls: type) -> RuleMatch | None:
        mro = cls.__mro__
        for path, scope in scopes:
            matching = [name for name in scope.exceptions if self._classes[name] in mro]
            if matching:
                name = min(matching, key=lambda name: mro.index(self._classes[name]))
                return RuleMatch(name, scope.exceptions[name], dotted((*path, "exceptions", name)))
        return None

    @staticmethod
    def _resolve(scopes: list[tuple[KeyPath, Scope]]) -> Settings:
        options = {name: _first(scopes, name, operator.attrgetter(name)) for name in _OPTIONS}
        return Settings(
            options=HandlerOptions(**{name: setting.value if setting else None
                                      for name, setting in options.items()}),
            option_sources={name: setting.where for name, setting in options.items() if setting},
            retry_level=_first(scopes, "levels.retry", lambda scope: scope.levels.retry),
            fatal_level=_first(scopes, "levels.fatal", lambda scope: scope.levels.fatal),
            timing=_timing(scopes),
            escalate=_first(scopes, "escalate", lambda scope: scope.escalate),
        )


def _first(scopes: list[tuple[KeyPath, Scope]], key: str,
           get: Callable[[Scope], T | None]) -> Setting[T] | None:
    """The value from the first scope that sets it."""
    for path, scope in scopes:
        value = get(scope)
        if value is not None:
            return Setting(value, dotted((*path, *key.split("."))))
    return None


def _timing(scopes: list[tuple[KeyPath, Scope]]) -> Setting[float | Backoff] | None:
    """A fixed delay or a backoff, whichever the first scope that sets one of them sets."""
    for path, scope in scopes:
        if scope.delay is not None:
            return Setting(scope.delay, dotted((*path, "delay")))
        if scope.backoff is not None:
            return Setting(scope.backoff, dotted((*path, "backoff")))
    return None
