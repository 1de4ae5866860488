"""
Typed hook implementations: one decorator per hook, so that a type checker (``mypy --strict``,
pyright) reports a wrong parameter name, a wrong type, a wrong return type or an ``async def``
in a plugin's hook, where pluggy would notice only some of these, and only at run time.

    from kopf_outcomes import hooks

    @hooks.classify_exception
    def classify(run: HandlerRun, exception: Exception) -> Outcome | None:
        ...

    @hooks.adjust_outcome.trylast
    def cap(run: HandlerRun, decision: Decision) -> None:
        ...

A decorated function takes all the hook's arguments, by the names of the hook's specification
(:mod:`kopf_outcomes.hookspecs`), and may have any name of its own: the decorator says which hook
it implements. ``.tryfirst`` and ``.trylast`` order it as pluggy's own markers do. Functions of a
module plugin only: a method's ``self`` does not match (use :data:`kopf_outcomes.hookimpl` there).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Any, Generic, Protocol, TypeVar

from kopf_outcomes.hookspecs import hookimpl
from kopf_outcomes.options import HandlerOptions
from kopf_outcomes.outcomes import Outcome
from kopf_outcomes.runs import Decision, HandlerRun, ResourceRef

__all__ = ["adjust_outcome", "classify_exception", "classify_result", "handler_options", "object_gone",
           "observe_object", "observe_outcome", "owned_fields"]


class HandlerOptionsHook(Protocol):
    def __call__(self, handler_id: str, resource: ResourceRef | None) -> HandlerOptions | None: ...


class ClassifyResultHook(Protocol):
    def __call__(self, run: HandlerRun, result: object) -> Outcome | None: ...


class ClassifyExceptionHook(Protocol):
    def __call__(self, run: HandlerRun, exception: Exception) -> Outcome | None: ...


class AdjustOutcomeHook(Protocol):
    def __call__(self, run: HandlerRun, decision: Decision) -> None: ...


class ObserveOutcomeHook(Protocol):
    def __call__(self, run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]) -> None: ...


class ObserveObjectHook(Protocol):
    def __call__(self, resource: ResourceRef | None, body: Mapping[str, Any], waiting: Mapping[str, str]) -> None: ...


class ObjectGoneHook(Protocol):
    def __call__(self, resource: ResourceRef | None, body: Mapping[str, Any]) -> None: ...


class OwnedFieldsHook(Protocol):
    def __call__(self) -> Iterable[str]: ...


F = TypeVar("F")


class Hook(Generic[F]):
    """The typed marker of one hook: ``@hook``, ``@hook.tryfirst`` or ``@hook.trylast``."""

    def __init__(self, name: str, *, tryfirst: bool = False, trylast: bool = False) -> None:
        self.name = name
        self._marker = hookimpl(specname=name, tryfirst=tryfirst, trylast=trylast)

    def __call__(self, function: F) -> F:
        marked: F = self._marker(function)  # type: ignore[type-var]  # F is a callable Protocol
        return marked

    @property
    def tryfirst(self) -> Callable[[F], F]:
        """The same marker, called before the implementations without ``tryfirst``."""
        return Hook[F](self.name, tryfirst=True)

    @property
    def trylast(self) -> Callable[[F], F]:
        """The same marker, called after the implementations without ``trylast``."""
        return Hook[F](self.name, trylast=True)

    def __repr__(self) -> str:
        return f"<typed hook marker {self.name}>"


#: ``(handler_id: str, resource: ResourceRef | None) -> HandlerOptions | None``
handler_options = Hook[HandlerOptionsHook]("kopf_outcomes_handler_options")
#: ``(run: HandlerRun, result: object) -> Outcome | None``
classify_result = Hook[ClassifyResultHook]("kopf_outcomes_classify_result")
#: ``(run: HandlerRun, exception: Exception) -> Outcome | None``
classify_exception = Hook[ClassifyExceptionHook]("kopf_outcomes_classify_exception")
#: ``(run: HandlerRun, decision: Decision) -> None``
adjust_outcome = Hook[AdjustOutcomeHook]("kopf_outcomes_adjust_outcome")
#: ``(run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]) -> None``
observe_outcome = Hook[ObserveOutcomeHook]("kopf_outcomes_observe_outcome")
#: ``(resource: ResourceRef | None, body: Mapping[str, Any], waiting: Mapping[str, str]) -> None``
observe_object = Hook[ObserveObjectHook]("kopf_outcomes_observe_object")
#: ``(resource: ResourceRef | None, body: Mapping[str, Any]) -> None``
object_gone = Hook[ObjectGoneHook]("kopf_outcomes_object_gone")
#: ``() -> Iterable[str]``
owned_fields = Hook[OwnedFieldsHook]("kopf_outcomes_owned_fields")
