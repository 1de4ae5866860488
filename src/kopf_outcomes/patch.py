"""
The process-wide patch of Kopf: four module globals of Kopf are wrapped, ``uninstall`` restores them.

- ``execution.invoke_handler`` — reads the handler's result or exception through the plugins.
  When the built-ins say "stock", the run continues in Kopf untouched: that is stock parity.
- ``execution.execute_handler_once`` — turns our decisions into Kopf's outcome, logs them
  at their level, keeps the per-state memory and tells the observers.
- ``execution.execute_handlers_once`` — also wakes parked handlers whose state has changed.
- ``application.apply`` — parked handlers neither make Kopf sleep nor "touch-dummy" the object.

A parked handler is one that is not finished and is delayed by ``PARKED_DELAY``: Kopf
keeps the finalizer for it (its delay is in the list), and ``apply`` ignores that delay.
"""
from __future__ import annotations

import contextvars
import dataclasses
import datetime
import enum
import logging
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import kopf

from kopf_outcomes import _kopf, engine, memory, recollection
from kopf_outcomes.options import HandlerOptions, options_of
from kopf_outcomes.outcomes import Fatal, Outcome, Pending, Retry, Success
from kopf_outcomes.plugins import Plugins
from kopf_outcomes.runs import HandlerRun, ResourceRef

if TYPE_CHECKING:
    from kopf_outcomes.policy import Policy

ex = _kopf.execution

PARKED_DELAY = 10 * 365 * 24 * 3600.0  # ten years: "until something changes"
_PARKED_THRESHOLD = PARKED_DELAY / 2


@dataclasses.dataclass
class _Installation:
    plugins: Plugins
    originals: dict[tuple[Any, str], Any]

    def __post_init__(self) -> None:  # direct references: every handler run goes through them
        self.invoke_handler = self.originals[(ex, "invoke_handler")]
        self.execute_handler_once = self.originals[(ex, "execute_handler_once")]
        self.apply = self.originals[(_kopf.application, "apply")]


_installed: _Installation | None = None

POLICY_PLUGIN_NAME = "kopf_outcomes.policy"

@dataclasses.dataclass(frozen=True)
class _Cycle:
    """One reaction cycle of one object: its memory, read once, and its handlers' ids, whose
    results in ``status`` are the operator's own writes (digested only when a digest is needed)."""

    records: Mapping[str, memory.Record]
    handlers: Collection[Any]
    state: Mapping[Any, Any]


# Per handler run: how the caller treats arbitrary exceptions; per cycle: see _Cycle.
_default_errors: contextvars.ContextVar[Any] = contextvars.ContextVar("kopf_outcomes_errors")
_cycle: contextvars.ContextVar[_Cycle | None] = contextvars.ContextVar("kopf_outcomes_cycle", default=None)


class _Decided(BaseException):
    """Carries a decided outcome past Kopf's own ``except Exception`` handling, unlogged."""

    def __init__(self, outcome: Outcome, run: HandlerRun, subrefs: Collection[Any]) -> None:
        super().__init__(outcome)
        self.outcome = outcome
        self.run = run
        self.subrefs = subrefs  # the sub-handlers it ran, for Kopf to purge their states later


def install(
    *,
    plugins: Iterable[object] = (),
    entry_points: bool = True,
    allow: Iterable[str] | None = None,
    deny: Iterable[str] = (),
    policy: Policy | str | os.PathLike[str] | None = None,
) -> Plugins:
    """
    Patch Kopf process-wide. Idempotent: a second call only registers new ``plugins``.

    Installed plugins are discovered from the ``kopf_outcomes`` entry-point group unless
    ``entry_points`` is False; ``allow``/``deny`` filter them by entry-point name.
    ``policy`` is a :class:`~kopf_outcomes.policy.Policy`, or a path to a TOML policy file
    (or to a ``pyproject.toml`` with ``[tool.kopf-outcomes]``); without it, the file named by
    the environment variable ``KOPF_OUTCOMES_POLICY`` is used, if set. An invalid policy
    raises at once, naming the file, the key and what is allowed.
    """
    global _installed
    policy_plugin = _policy_plugin(policy)  # an invalid policy fails before anything is patched
    if _installed is None:
        _kopf.check_version()
        found = Plugins()
        if entry_points:
            found.load_entry_points(allow=allow, deny=deny)
        originals: dict[tuple[Any, str], Any] = {
            (ex, "invoke_handler"): ex.invoke_handler,
            (ex, "execute_handler_once"): ex.execute_handler_once,
            (ex, "execute_handlers_once"): ex.execute_handlers_once,
            (_kopf.application, "apply"): _kopf.application.apply,
        }
        _installed = _Installation(plugins=found, originals=originals)
        for (module, name) in originals:
            setattr(module, name, globals()[name])
    if policy_plugin is not None:
        _installed.plugins.replace(policy_plugin, name=POLICY_PLUGIN_NAME)
    for plugin in plugins:
        if not _installed.plugins.manager.is_registered(plugin):
            _installed.plugins.register(plugin)
    return _installed.plugins


def _policy_plugin(policy: Policy | str | os.PathLike[str] | None) -> object | None:
    source = policy if policy is not None else os.environ.get("KOPF_OUTCOMES_POLICY") or None
    if source is None:
        return None
    from kopf_outcomes.policy import PolicyPlugin, load_policy

    return PolicyPlugin(load_policy(source))


def uninstall() -> None:
    """Restore Kopf exactly as it was. Idempotent."""
    global _installed
    if _installed is not None:
        for (module, name), original in _installed.originals.items():
            setattr(module, name, original)
        _installed = None


def installed() -> Plugins:
    """The plugins of the current installation; a clear error if there is none."""
    return _current().plugins


def _current() -> _Installation:
    if _installed is None:  # a wrapper kept by someone across uninstall()
        raise RuntimeError("kopf-outcomes is not installed: call kopf_outcomes.install() first")
    return _installed


# --- the wrapped functions --------------------------------------------------------------------

async def invoke_handler(**kwargs: Any) -> Any:
    installation = _current()
    plugins = installation.plugins
    handler, cause = kwargs["handler"], kwargs["cause"]
    try:
        result = await installation.invoke_handler(**kwargs)
    except ex.HandlerChildrenRetry:
        raise  # Kopf's own sub-handler bookkeeping, not the handler's verdict
    except Exception as e:
        ours = isinstance(e, Outcome) or _retains_permanent(plugins, handler, cause, e)
        if plugins.decides_builtin and not ours:
            raise
        run = _run(plugins, handler, cause, kwargs["retry"], kwargs["runtime"], kwargs["settings"])
        outcome = engine.decide(plugins, run, exception=e)
        if outcome is None:
            raise
        raise _Decided(outcome, run, kwargs["subrefs"]) from e
    if plugins.decides_builtin and not isinstance(result, Outcome):
        if not _options(plugins, handler, cause).explicit_completion:
            return result
    run = _run(plugins, handler, cause, kwargs["retry"], kwargs["runtime"], kwargs["settings"])
    outcome = engine.decide(plugins, run, result=result)
    if outcome is None:
        return result
    raise _Decided(outcome, run, kwargs["subrefs"])


async def execute_handler_once(
    settings: Any,
    handler: Any,
    cause: Any,
    state: Any,
    lifecycle: Any = None,
    extra_context: Any = ex.no_extra_context,
    default_errors: Any = ex.ErrorsMode.TEMPORARY,
) -> Any:
    installation = _current()
    plugins = installation.plugins
    body = getattr(cause, "body", None)
    record = _records_of(cause).get(handler.id) if body is not None else None
    if record is not None and record["outcome"] == "retained" and memory.release_requested(body, handler.id):  # type: ignore[arg-type]
        cause.logger.warning(f"{handler} is released by the annotation {memory.RELEASE_ANNOTATION!r}; "
                             f"the finalizer is no longer retained.")
        run = _run(plugins, handler, cause, state.retries, state.runtime, settings, record)
        return _conclude(plugins, run, handler, cause, Fatal(record["reason"], on_delete="release"),
                         ex.Outcome(final=True, exception=kopf.PermanentError(record["reason"])))

    # Only plugins need the caller's errors mode (to read arbitrary exceptions as Kopf would).
    token = None if plugins.decides_builtin else _default_errors.set(default_errors)
    try:
        outcome = await installation.execute_handler_once(
            settings=settings, handler=handler, cause=cause, state=state, lifecycle=lifecycle,
            extra_context=extra_context, default_errors=default_errors,
        )
    except _Decided as decided:
        return _realize(plugins, decided.run, decided.outcome, handler, cause, state, decided.subrefs)
    finally:
        if token is not None:
            _default_errors.reset(token)

    # Stock Kopf decided. Keep the memory right and tell the observers, if there are any.
    if record is None and not plugins.observed and not _options(plugins, handler, cause).remember:
        return outcome
    run = _run(plugins, handler, cause, state.retries, state.runtime, settings, record)
    return _conclude(plugins, run, handler, cause, _from_kopf(outcome), outcome)


async def execute_handlers_once(
    lifecycle: Any,
    settings: Any,
    handlers: Collection[Any],
    cause: Any,
    state: Any,
    extra_context: Any = ex.no_extra_context,
    default_errors: Any = ex.ErrorsMode.TEMPORARY,
) -> Mapping[Any, Any]:
    """Kopf's own selection of awakened handlers, plus the parked ones whose state changed."""
    body = getattr(cause, "body", None)
    records = memory.read(body, cause.logger) if body is not None else {}
    token = _cycle.set(_Cycle(records=records, handlers=handlers, state=state))
    try:
        plugins = installed()
        if plugins.observes_objects and body is not None and isinstance(getattr(cause, "reason", None), enum.Enum):
            _observe_object(plugins, handlers, cause, state, records)
        handlers_todo, woken = [], []
        for h in handlers:
            if state[h.id].awakened:
                handlers_todo.append(h)
            elif _wakes(plugins, h, cause, state[h.id], records[h.id]) if h.id in records else _parked(state[h.id]):
                handlers_todo.append(h)
                woken.append(h)
        handlers_plan = lifecycle(handlers_todo, state=state, **cause.kwargs)
        outcomes = {}
        for handler in handlers_plan:
            outcomes[handler.id] = await ex.execute_handler_once(
                settings=settings,
                handler=handler,
                state=state[handler.id],
                cause=cause,
                lifecycle=lifecycle,
                extra_context=extra_context,
                default_errors=default_errors,
            )
        # A finished handler that saw an older state and is not planned now (the lifecycle
        # runs one at a time) is re-armed, so that the cause does not end before it re-runs.
        for handler in woken:
            if handler.id not in outcomes and state[handler.id].finished:
                outcomes[handler.id] = ex.Outcome(final=False, delay=0)
        return outcomes
    finally:
        _cycle.reset(token)


async def apply(**kwargs: Any) -> Any:
    """Kopf's apply, blind to parked handlers: no sleeping for them, no touch-dummy writes."""
    delays = kwargs.get("delays")
    if delays:
        kwargs["delays"] = [delay for delay in delays if delay < _PARKED_THRESHOLD]
    return await _current().apply(**kwargs)


def _observe_object(plugins: Plugins, handlers: Collection[Any], cause: Any, state: Any,
                    records: Mapping[str, memory.Record]) -> None:
    """Tell the plugins which handlers of this object wait, as memory and Kopf's progress say."""
    waiting: dict[str, str] = {}
    for handler in handlers:
        if state[handler.id].finished:
            continue
        record = records.get(handler.id)
        if record is not None and record["outcome"] in ("pending", "retained"):
            waiting[str(handler.id)] = record["outcome"]
        elif state[handler.id].retries:
            waiting[str(handler.id)] = "retrying"
    try:
        plugins.manager.hook.kopf_outcomes_observe_object(resource=_resource(cause), body=cause.body, waiting=waiting)
    except Exception as e:  # contained: an observer never breaks Kopf's cycle
        cause.logger.error(f"plugin {plugins.culprit(e)!r} failed in kopf_outcomes_observe_object: "
                           f"{type(e).__name__}: {e}")


def _retains_permanent(plugins: Plugins, handler: Any, cause: Any, error: Exception) -> bool:
    """Kopf's PermanentError on deletion with fatal_on_delete="retain" is ours to realize."""
    return isinstance(error, kopf.PermanentError) and _options(plugins, handler, cause).fatal_on_delete == "retain"


def current_recall() -> recollection.Recall:
    """For :func:`kopf_outcomes.recall`: the running handler and its cause, as Kopf set them."""
    try:
        handler, cause = ex.handler_var.get(), ex.cause_var.get()
    except LookupError:
        raise RuntimeError("kopf_outcomes.recall() works only inside a handler") from None
    body = getattr(cause, "body", None)
    if body is None or _installed is None:
        raise RuntimeError("kopf_outcomes.recall() works only inside a handler of an object, "
                           "with kopf_outcomes.install() done")
    previous = _records_of(cause).get(str(handler.id))
    return recollection.Recall(previous=previous, digest=_digest(_installed.plugins, handler, cause))


# --- deciding and realizing --------------------------------------------------------------------

def _wakes(plugins: Plugins, handler: Any, cause: Any, state: Any, record: memory.Record) -> bool:
    """Whether a handler that Kopf would skip must run now because its state has changed."""
    if record["outcome"] == "retained":
        return memory.release_requested(cause.body, handler.id)
    if state.finished and not (record["outcome"] == "success" and _options(plugins, handler, cause).remember):
        return False
    return record["digest"] != _digest(plugins, handler, cause)


def _records_of(cause: Any) -> Mapping[str, memory.Record]:
    """The memory as read once per cycle by execute_handlers_once; read now if called directly."""
    cycle = _cycle.get()
    return cycle.records if cycle is not None else memory.read(cause.body, cause.logger)


def _parked(state: Any) -> bool:
    """Parked by us but with no memory to tell when to wake (lost, or garbage): run it again,
    so that it concludes afresh and its memory is written anew."""
    if state.finished or state.delayed is None:
        return False
    now = datetime.datetime.now(datetime.timezone.utc)
    if state.delayed.tzinfo is None:  # older Kopf stores naive UTC times
        now = now.replace(tzinfo=None)
    remaining = (state.delayed - now).total_seconds()
    return bool(remaining > _PARKED_THRESHOLD)


def _digest(plugins: Plugins, handler: Any, cause: Any) -> str:
    options = _options(plugins, handler, cause)
    cycle = _cycle.get()
    handler_ids = {h.id for h in cycle.handlers} | set(cycle.state) if cycle is not None else {handler.id}
    excluded: list[tuple[str, ...]] = [("status", str(handler_id)) for handler_id in handler_ids]
    owned = [tuple(field.split(".")) for field in plugins.owned_fields()]
    return memory.digest(cause.body, depends_on=options.depends_on, excluded=excluded + owned)


def _realize(plugins: Plugins, run: HandlerRun, outcome: Outcome, handler: Any, cause: Any,
             state: Any, subrefs: Collection[Any] = ()) -> Any:
    """Log the decided outcome at its level and turn it into Kopf's outcome."""
    logger = cause.logger
    if isinstance(outcome, Success):
        logger.info(f"{handler} succeeded.")
        result = ex.Outcome(final=True, result=ex.Result(outcome.result))
    elif isinstance(outcome, Pending):
        previous = run.previous
        same = previous is not None and previous["outcome"] == "pending" and previous["reason"] == outcome.reason
        logger.log(logging.DEBUG if same else logging.INFO, f"{handler} is pending: {outcome.reason}")
        delay = outcome.recheck if outcome.recheck is not None else PARKED_DELAY
        result = ex.Outcome(final=False, exception=outcome, delay=delay)
    elif isinstance(outcome, Retry):
        result = _retry(handler, state, outcome, logger)
    elif isinstance(outcome, Fatal) and _retains(run, outcome):
        name = getattr(cause.body, "metadata", {}).get("name", "")
        logger.log(outcome.level, f"{handler} failed permanently: {outcome.reason}. The finalizer is "
                                  f"retained; to release the object, annotate it: "
                                  f"{memory.RELEASE_ANNOTATION}={handler.id} (object {name!r}).")
        result = ex.Outcome(final=False, exception=kopf.PermanentError(outcome.reason), delay=PARKED_DELAY)
    elif isinstance(outcome, Fatal):
        logger.log(outcome.level, f"{handler} failed permanently: {outcome.reason}")
        result = ex.Outcome(final=True, exception=kopf.PermanentError(outcome.reason))
    else:  # an Outcome subclass of a user's own making
        unknown = Retry(f"unknown outcome type {type(outcome).__name__}; expected Success, Pending, "
                        f"Retry or Fatal", delay=run.backoff, level=logging.ERROR)
        return _realize(plugins, run, unknown, handler, cause, state, subrefs)
    result = dataclasses.replace(result, subrefs=subrefs)
    return _conclude(plugins, run, handler, cause, outcome, result)


def _retry(handler: Any, state: Any, outcome: Retry, logger: Any) -> Any:
    """A Retry counts against the handler's ``retries=`` and ``timeout=``, as TemporaryError does."""
    limited = state is not None and not isinstance(outcome, engine.PluginFailure)
    runtime = state.runtime.total_seconds() + outcome.delay if limited else 0.0
    if limited and handler.timeout is not None and runtime >= handler.timeout:
        msg = f"{handler} failed temporarily but will time out after {handler.timeout} seconds: {outcome.reason}"
        logger.error(msg)
        return ex.Outcome(final=True, exception=kopf.HandlerTimeoutError(msg))
    if limited and handler.retries is not None and state.retries + 1 >= handler.retries:
        msg = f"{handler} failed temporarily but will exceed {handler.retries} retries: {outcome.reason}"
        logger.error(msg)
        return ex.Outcome(final=True, exception=kopf.HandlerRetriesError(msg))
    logger.log(outcome.level, f"{handler} failed temporarily: {outcome.reason}")
    return ex.Outcome(final=False, exception=kopf.TemporaryError(outcome.reason, delay=outcome.delay),
                      delay=outcome.delay)


def _retains(run: HandlerRun, outcome: Fatal) -> bool:
    on_delete = outcome.on_delete or run.options.fatal_on_delete or "release"
    return run.reason == "delete" and on_delete == "retain"


def _conclude(plugins: Plugins, run: HandlerRun, handler: Any, cause: Any, outcome: Outcome,
              result: Any) -> Any:
    """Remember what the handler concluded about this state, and tell the observers."""
    body, patch = getattr(cause, "body", None), getattr(cause, "patch", None)
    if body is not None and patch is not None:
        conclusion = _conclusion(outcome, result)
        record: memory.Record | None = None
        if conclusion in ("pending", "retained") or run.options.remember:
            record = memory.Record(digest=_digest(plugins, handler, cause), outcome=conclusion,
                                   reason=str(outcome) if not isinstance(outcome, Success) else "")
        memory.write(body, patch, str(handler.id), record, cause.logger)
    fallback = engine.observe(plugins, run, outcome, patch if patch is not None else {})
    if fallback is not None:  # an observer failed: retry, whatever was decided
        return _retry(handler, None, fallback, cause.logger)
    return result


def _conclusion(outcome: Outcome, result: Any) -> memory.Conclusion:
    if isinstance(outcome, Pending):
        return "pending"
    if isinstance(outcome, Success):
        return "success"
    if isinstance(outcome, Retry):
        return "retry" if not result.final else "fatal"
    return "fatal" if result.final else "retained"


def _from_kopf(outcome: Any) -> Outcome:
    """Stock Kopf's outcome in our terms, for the observers."""
    if outcome.final and outcome.exception is None:
        return Success(outcome.result)
    if outcome.final:
        return Fatal(str(outcome.exception) or repr(outcome.exception))
    return Retry(str(outcome.exception) or repr(outcome.exception),
                 delay=outcome.delay or 0, level=logging.ERROR)


# --- the run as plugins see it -------------------------------------------------------------------

_NO_OPTIONS = HandlerOptions()


def _options(plugins: Plugins, handler: Any, cause: Any) -> HandlerOptions:
    own = options_of(handler.fn)
    if not plugins.provides_options:  # the hot path: no policy, no options plugin
        return own if own is not None else _NO_OPTIONS
    from_plugins = plugins.options(str(handler.id), _resource(cause))
    return own.merged(from_plugins) if own is not None else from_plugins


_resource_refs: dict[int, tuple[Any, ResourceRef]] = {}  # Kopf's resource objects live long


def _resource(cause: Any) -> ResourceRef | None:
    resource = getattr(cause, "resource", None)
    if resource is None:
        return None
    try:
        known, ref = _resource_refs[id(resource)]
        if known is resource:
            return ref
    except KeyError:
        pass
    ref = ResourceRef(resource.group, resource.version, resource.plural, resource.kind)
    _resource_refs[id(resource)] = (resource, ref)  # the object is kept, so its id is not reused
    return ref


_UNREAD: Any = object()


def _run(plugins: Plugins, handler: Any, cause: Any, retry: int, runtime: datetime.timedelta,
         settings: Any, previous: memory.Record | None = _UNREAD) -> HandlerRun:
    body = getattr(cause, "body", None)
    reason = getattr(cause, "reason", None)
    errors = handler.errors if handler.errors is not None else _default_errors.get(ex.ErrorsMode.TEMPORARY)
    backoff = handler.backoff if handler.backoff is not None else _kopf.default_backoff(settings)
    return HandlerRun(
        handler_id=str(handler.id),
        reason=str(reason.value) if isinstance(reason, enum.Enum) else None,
        resource=_resource(cause),
        body=body,
        retry=retry,
        runtime=runtime.total_seconds(),
        deleting=bool(body is not None and (body.get("metadata") or {}).get("deletionTimestamp")),
        options=_options(plugins, handler, cause),
        logger=cause.logger,
        previous=(previous if previous is not _UNREAD else
                  _records_of(cause).get(str(handler.id)) if body is not None else None),
        errors_mode=errors.name if isinstance(errors, enum.Enum) else str(errors),
        backoff=float(backoff),
    )


__all__: Sequence[str] = ["install", "uninstall", "installed", "PARKED_DELAY"]
