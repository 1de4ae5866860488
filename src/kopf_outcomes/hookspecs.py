"""
Hook specifications: the ways plugins take part in deciding what a handler run means.

Eight hooks. A run goes through five of them, in four steps:

1. ``kopf_outcomes_handler_options`` — once per handler and resource kind, cached.
2. ``kopf_outcomes_classify_result`` or ``kopf_outcomes_classify_exception`` — first result:
   the first plugin that returns an outcome decides; the built-ins reproduce stock Kopf and run last.
3. ``kopf_outcomes_adjust_outcome`` — every plugin may replace the decided outcome.
4. ``kopf_outcomes_observe_outcome`` — every plugin is told the final outcome and may add
   to the object's patch (never make API calls of its own: the patch is applied by Kopf,
   together with Kopf's own changes, in one request).

Beside the runs: ``kopf_outcomes_observe_object`` tells every plugin which handlers of an object
wait, once per processing cycle, and ``kopf_outcomes_object_gone`` when the object has left;
``kopf_outcomes_owned_fields`` asks each plugin, once, which fields it writes (they never wake a
parked handler).

Every hook is called inside Kopf's event loop, on every handler run: implementations must be
plain (never ``async def``: such a plugin is refused at registration, with its name), quick, and
free of I/O. Slow work belongs in a Kopf daemon or a thread that the hook only hands data to.
A hook that does not exist here is refused at registration too (pluggy's ``check_pending``).

A plugin that raises anything in any hook is contained where the hook is called: it is logged
with its name, the run falls back to the safe side (``Retry`` at ERROR: the finalizer is kept and
the handler runs again; for hooks that only inform, the run goes on without the plugin's
answer), and the operator keeps running.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

import pluggy

from kopf_outcomes.options import HandlerOptions
from kopf_outcomes.outcomes import Outcome
from kopf_outcomes.runs import Decision, HandlerRun, ResourceRef

PROJECT_NAME = "kopf_outcomes"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def kopf_outcomes_handler_options(handler_id: str, resource: ResourceRef | None) -> HandlerOptions | None:
    """Options for a handler: memory scope, explicit completion, fatal-on-delete, ...

    Called once per handler id and resource kind; the answer is cached for the process.
    All answers are merged field by field; the first plugin to set a field wins
    (options from :func:`kopf_outcomes.handler_options` come first, then policies).
    A plugin that raises or answers wrongly (options whose values fail their check included) is
    left out (only it, asked again next time), and a deletion handler whose options it did not give
    holds its finalizer (docs: safety, fail closed). A hook wrapper that fails is left out likewise.

    :param handler_id: Kopf's handler id, e.g. ``"delete_fn"`` or ``"create_fn/sub1"``.
    :param resource: the resource kind, or None for handlers not bound to one (activities).
    :return: options, with None for the fields this plugin does not set; or None.
    """


@hookspec(firstresult=True)
def kopf_outcomes_classify_result(run: HandlerRun, result: object) -> Outcome | None:
    """Decide what a handler's return value means.

    Called after every handler run that returned normally, with the returned value, except when
    the value is an outcome (the handler's own decision) or the handler's kind is stock Kopf's
    (indexers, ``@kopf.on.event``, login handlers). Stops at the first non-None result.
    The built-in implementation runs last: with ``explicit_completion``, True/False become
    Success/Pending; anything else is a :class:`~kopf_outcomes.Success` carrying the result.

    :param run: the handler run.
    :param result: what the handler returned.
    :return: the outcome, or None to let the next plugin (finally the built-in) decide.
    """


@hookspec(firstresult=True)
def kopf_outcomes_classify_exception(run: HandlerRun, exception: Exception) -> Outcome | None:
    """Decide what an exception raised by a handler means.

    Called after every handler run that raised (never for cancellation, never for an outcome the
    handler raised: that is its own decision). Stops at the first non-None result.
    The built-in implementation runs last and reproduces stock Kopf:
    ``TemporaryError`` → ``Retry(level=ERROR)``, ``PermanentError`` → ``Fatal``, other
    exceptions by the handler's ``errors=`` mode.

    :param run: the handler run.
    :param exception: what the handler raised.
    :return: the outcome, or None to let the next plugin decide.
    """


@hookspec
def kopf_outcomes_adjust_outcome(run: HandlerRun, decision: Decision) -> None:
    """Adjust the decided outcome: escalate after N retries, cap levels, retain on delete.

    Called for every decided outcome, by every plugin, in pluggy's order (``tryfirst`` and
    ``trylast`` apply). Replace ``decision.outcome`` to change it; later plugins see the
    replacement. Return values are ignored.

    :param run: the handler run.
    :param decision: the decision so far; ``decision.origin`` is the handler's own result
        or exception; ``decision.stock`` is True while the outcome is stock Kopf's own reading,
        which Kopf then runs unchanged unless a hook replaces it.
    """


@hookspec
def kopf_outcomes_observe_outcome(
    run: HandlerRun, outcome: Outcome, patch: MutableMapping[str, Any]
) -> None:
    """Be told the final outcome of a handler run: for conditions, metrics, audit trails.

    Called for every run (not of indexers, ``@kopf.on.event`` or login handlers: those kinds are
    stock Kopf's), by every plugin, after the decision is final. The outcome cannot be
    changed here. ``patch`` is the merge-patch Kopf applies to the object at the end of this
    cycle: add to it, never call the API from here (one cycle, one request). It may not change
    ``metadata.finalizers`` or the operator's memory (not by replacing ``metadata`` or its
    ``annotations`` either), nor Kopf's patch functions (``patch.fns``): such a change is undone
    (``metadata`` and the patch functions put back as they were) and the run is retried, the
    plugin named (a person's release of a retained handler is retried as a release: the handler
    does not run again). The operator's memory of the outcome (a retention's stamp included) is
    in ``patch`` already when the observers are told.
    Fields a plugin writes should be named by :func:`kopf_outcomes_owned_fields`, so that
    they do not wake parked handlers.

    :param run: the handler run.
    :param outcome: the final outcome.
    :param patch: the object's pending merge-patch (empty for handlers without an object).
    """


@hookspec
def kopf_outcomes_observe_object(
    resource: ResourceRef | None, body: Mapping[str, Any], waiting: Mapping[str, str]
) -> None:
    """Be told which handlers of an object wait, on every processing cycle: for metrics.

    Called once per cycle of each object that Kopf handles with change handlers (every watch
    event, the initial listing after an operator restart included), before any handler runs,
    also when none will: parked objects are not re-run, and this is how their waiting is seen.
    Never called for Kopf's informational causes (gone, free, no-op). Must be cheap: no API calls.

    :param resource: the resource kind.
    :param body: the object as Kopf sees it in this cycle.
    :param waiting: this cycle's handlers that wait, by id: ``"pending"``, ``"retrying"`` or
        ``"retained"`` (a finalizer kept after a Fatal). Handlers not waiting are absent.
    """


@hookspec
def kopf_outcomes_object_gone(resource: ResourceRef | None, body: Mapping[str, Any]) -> None:
    """Be told that an object has left the operator's watch (Kopf's watch saw it deleted): nothing
    of it waits here any more, whatever ``kopf_outcomes_observe_object`` last said. For metrics
    that keep state per object. Called after Kopf's processing of the deletion, once per object of
    every resource that Kopf watches; again if it comes back and leaves again: where the API
    server selects the objects (Kopf 1.45's ``settings.watching.label_selectors``, as shards by
    label do), an object relabelled out of the selection is "deleted" for this operator while it
    lives on elsewhere; where Kopf filters by a declared shard's label instead, an object
    relabelled to another shard is told as it moves (Kopf runs none of its handlers here), and an
    object of another shard may be told again, once each time Kopf starts a worker for its events.
    Must be cheap: no API calls.

    :param resource: the resource kind.
    :param body: the object's last state.
    """


@hookspec
def kopf_outcomes_owned_fields() -> Iterable[str]:
    """Field paths the plugin writes into objects, e.g. ``"status.conditions"``.

    Called once per process, the answers are concatenated. Changes to these fields never wake a
    parked handler: an operator must not wake itself up with its own writes.
    """
    return ()
