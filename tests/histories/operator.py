"""
The operator under test, built from a generated description: real Kopf handlers in a real Kopf
registry, each recording what ``recall()`` told it before it does what the history says; a plugin
that raises or answers wrongly at the hook and moment the history says; and the policy.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import kopf

import kopf_outcomes
from kopf_outcomes.policy import ExceptionRule, Policy, Scope
from tests.histories import model

RESOURCE = ("kopf.dev", "v1", "kopfexamples")


@dataclasses.dataclass(frozen=True)
class Run:
    """One call of a handler function, as the handler saw it."""

    handler: str
    behaviour: str
    state: Any  # the part of the object it depends on, by the model's rules
    acted: bool  # recall().acted_on_this_state
    key: str  # recall().idempotency_key
    faults: Mapping[str, str]  # the plugin's faults in force
    own: Any  # the operator's own writes in the object it saw (model.own_writes): a fresh key is made from them


@dataclasses.dataclass
class World:
    """What the handlers and the plugin do: set by the history, read at each run."""

    behaviours: dict[str, str]
    own_writes: set[str] = dataclasses.field(default_factory=set)
    faults: dict[str, str] = dataclasses.field(default_factory=dict)
    runs: list[Run] = dataclasses.field(default_factory=list)
    # The handlers whose options the plugin answered well in this process: cached from then on
    # (plugins.md, hookspecs: "once per handler id and resource kind; cached for the process").
    options_cached: set[str] = dataclasses.field(default_factory=set)

    def faults_for(self, handler_id: str) -> dict[str, str]:
        """The faults in force for a run of this handler: a failing options hook does not reach a
        handler whose options were read (and cached) before it began to fail."""
        return {hook: mode for hook, mode in self.faults.items()
                if not (hook == "handler_options" and handler_id in self.options_cached)}


def registry_of(handlers: tuple[model.HandlerSpec, ...], policy: model.PolicySpec,
                world: World) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    for handler in handlers:
        decorator: Callable[..., Any] = {
            "create": kopf.on.create, "update": kopf.on.update, "delete": kopf.on.delete, "resume": kopf.on.resume,
        }[handler.cause]
        fn = _handler_fn(handler, policy, world)
        if handler.options:
            fn = kopf_outcomes.handler_options(**handler.options)(fn)
        decorator(*RESOURCE, registry=registry, id=handler.id, retries=handler.retries)(fn)
    return registry


def _handler_fn(handler: model.HandlerSpec, policy: model.PolicySpec, world: World) -> Callable[..., Any]:
    if handler.subs:
        return _parent_fn(handler, policy, world)
    depends_on = policy.option(handler, "depends_on")

    def fn(body: kopf.Body, patch: kopf.Patch, **_: Any) -> Any:
        memory = kopf_outcomes.recall()
        behaviour = world.behaviours[handler.id]
        world.runs.append(Run(handler.id, behaviour, model.state_seen(body, depends_on),
                              memory.acted_on_this_state, memory.idempotency_key, world.faults_for(handler.id),
                              model.own_writes(body)))
        if handler.id in world.own_writes:
            patch.setdefault("status", {})[f"own-{handler.id}"] = len(world.runs)
        return act(behaviour)
    return fn


def _parent_fn(parent: model.HandlerSpec, policy: model.PolicySpec, world: World) -> Callable[..., Any]:
    """A handler whose work is its sub-handlers (Kopf's ``@kopf.subhandler``): done when they all are."""
    children = [(sub, _handler_fn(sub, policy, world)) for sub in parent.subs]
    done = True if policy.option(parent, "explicit_completion") else None  # its own answer: "done"

    def fn(**_: Any) -> Any:
        for sub, child in children:
            kopf.subhandler(id=sub.id.split("/", 1)[1])(child)
        return done
    return fn


def act(behaviour: str) -> Any:
    """Do what the behaviour names: return or raise an outcome, a stock exception or a plain value."""
    if behaviour == "fatal_bad":
        fatal = kopf_outcomes.Fatal("broken")
        fatal.on_delete = "maybe"  # type: ignore[assignment]  # set after it was built (issue 41, 6)
        return fatal
    made: dict[str, Callable[[], Any]] = {
        "success": lambda: kopf_outcomes.Success(),
        "pending": lambda: kopf_outcomes.Pending("waiting"),
        "pending_recheck": lambda: kopf_outcomes.Pending("waiting", recheck=5),
        "retry": lambda: kopf_outcomes.Retry("later", delay=5),
        "fatal": lambda: kopf_outcomes.Fatal("broken"),
        "fatal_retain": lambda: kopf_outcomes.Fatal("broken", on_delete="retain"),
        "fatal_release": lambda: kopf_outcomes.Fatal("broken", on_delete="release"),
        "true": lambda: True, "false": lambda: False, "none": lambda: None, "value": lambda: "x",
    }
    raised: dict[str, Callable[[], BaseException]] = {
        "raise_pending": lambda: kopf_outcomes.Pending("waiting"),
        "raise_retry": lambda: kopf_outcomes.Retry("later", delay=5),
        "raise_fatal": lambda: kopf_outcomes.Fatal("broken"),
        "temporary": lambda: kopf.TemporaryError("not yet", delay=5),
        "permanent": lambda: kopf.PermanentError("never"),
        "other_error": lambda: ValueError("oops"),
    }
    if behaviour in raised:
        raise raised[behaviour]()
    return made[behaviour]()


BEHAVIOURS = ("success", "pending", "pending_recheck", "retry", "fatal", "fatal_retain", "fatal_release",
              "fatal_bad", "raise_pending", "raise_retry", "raise_fatal", "temporary", "permanent",
              "other_error", "true", "false", "none", "value")


def policy_of(spec: model.PolicySpec) -> Policy:
    rules = {"builtins.ValueError": ExceptionRule(outcome=spec.value_error)} if spec.value_error else {}
    return Policy(defaults=Scope(**_tupled(spec.defaults), exceptions=rules),
                  handlers={hid: Scope(**_tupled(options)) for hid, options in spec.handlers.items()})


def _tupled(options: Mapping[str, Any]) -> dict[str, Any]:
    return {name: tuple(value) if isinstance(value, list) else value for name, value in options.items()}


class FaultyPlugin:
    """A plugin at every hook, which raises or answers wrongly where ``world.faults`` says so."""

    def __init__(self, world: World) -> None:
        self.world = world

    def _mode(self, hook: str) -> str:
        mode = self.world.faults.get(hook, "ok")
        if mode == "raise":
            raise RuntimeError(f"the faulty plugin fails in {hook}")
        return mode

    @kopf_outcomes.hookimpl
    def kopf_outcomes_handler_options(self, handler_id: str, resource: Any) -> Any:
        if self._mode("handler_options") == "wrong":
            return "not options"
        self.world.options_cached.add(handler_id)
        return None

    @kopf_outcomes.hookimpl
    def kopf_outcomes_classify_result(self, run: Any, result: object) -> Any:
        return "not an outcome" if self._mode("classify_result") == "wrong" else None

    @kopf_outcomes.hookimpl
    def kopf_outcomes_classify_exception(self, run: Any, exception: Exception) -> Any:
        return "not an outcome" if self._mode("classify_exception") == "wrong" else None

    @kopf_outcomes.hookimpl
    def kopf_outcomes_adjust_outcome(self, run: Any, decision: Any) -> None:
        mode = self._mode("adjust_outcome")
        if mode == "not_outcome":
            decision.outcome = "not an outcome"
        elif mode == "fatal_bad":
            fatal = kopf_outcomes.Fatal("the plugin says so")
            fatal.on_delete = "maybe"  # type: ignore[assignment]
            decision.outcome = fatal
        elif mode == "success":
            decision.outcome = kopf_outcomes.Success()

    @kopf_outcomes.hookimpl
    def kopf_outcomes_observe_outcome(self, run: Any, outcome: Any, patch: Any) -> None:
        mode = self._mode("observe_outcome")
        if mode == "finalizers":
            patch.setdefault("metadata", {})["finalizers"] = []
        elif mode == "status":
            patch.setdefault("status", {})["plugin-seen"] = type(outcome).__name__

    @kopf_outcomes.hookimpl
    def kopf_outcomes_observe_object(self, resource: Any, body: Any, waiting: Any) -> None:
        self._mode("observe_object")

    @kopf_outcomes.hookimpl
    def kopf_outcomes_owned_fields(self) -> Any:
        return ["status.plugin-seen"] if self._mode("owned_fields") != "wrong" else 42


FAULTS: Mapping[str, tuple[str, ...]] = {
    "handler_options": ("ok", "raise", "wrong"),
    "classify_result": ("ok", "raise", "wrong"),
    "classify_exception": ("ok", "raise", "wrong"),
    "adjust_outcome": ("ok", "raise", "not_outcome", "fatal_bad", "success"),
    "observe_outcome": ("ok", "raise", "finalizers", "status"),
    "observe_object": ("ok", "raise"),
}
