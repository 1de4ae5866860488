"""
The wrapped Kopf functions, put into Kopf by ``attach()`` and back by ``detach()``. Each is thin:
it reads what Kopf passes, asks the engine, and hands the answer on; everything it does not
decide stays Kopf's own. Which functions, and what each wrapper adds, is said once, in
docs/explanation/attachment.md (its test checks the table against :attr:`Wrappers.originals`).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from kopf_outcomes import engine, objects
from kopf_outcomes._kopf import delays, held, kopf_runs, listing, readiness, requeue
from kopf_outcomes._kopf.cycle import KEYS
from kopf_outcomes._kopf.handler_run import Runs
from kopf_outcomes._kopf.internals import (
    aiotoggles,
    application,
    execution,
    finalizers,
    indexing,
    observation,
    patches,
    queueing,
    watching,
)
from kopf_outcomes._kopf.own_writes import OwnWrites
from kopf_outcomes._kopf.reaction import Reactions
from kopf_outcomes.manager import PluginManager

_LOGGER = logging.getLogger("kopf_outcomes")


class Wrappers:
    """One installation's wrappers of Kopf's functions; ``attach()`` puts them in, ``detach()`` back."""

    def __init__(self, plugins: PluginManager) -> None:
        self.plugins = plugins
        self.originals: dict[tuple[Any, str], Any] = {
            (execution, "invoke_handler"): execution.invoke_handler,
            (execution, "execute_handler_once"): execution.execute_handler_once,
            (execution, "execute_handlers_once"): execution.execute_handlers_once,
            (application, "apply"): application.apply,
            (queueing, "worker"): queueing.worker,
            (queueing, "watcher"): queueing.watcher,
            (indexing, "index_resource"): indexing.index_resource,
            (watching, "continuous_watch"): watching.continuous_watch,
            (aiotoggles.ToggleSet, "wait_for"): aiotoggles.ToggleSet.wait_for,
            (observation, "revise_namespaces"): observation.revise_namespaces,
            (finalizers, "allow_deletion"): finalizers.allow_deletion,
            (patches.Patch, "as_json_patch"): patches.Patch.as_json_patch,
        }
        runs = Runs(plugins, execution.invoke_handler, execution.execute_handler_once)
        # Bound once: the cycle knows its own entry by identity (``is``), on every run.
        self.execute_handler_once = runs.execute_handler_once
        self.invoke_handler_any = runs.invoke_handler_any  # a Kopf whose invoke_handler has other parameters
        self.invoke_handler = runs.invoke_handler if runs.plain_invoke else self.invoke_handler_any
        self.own_writes = OwnWrites()  # this installation's: a new process knows none
        self.execute_handlers_once = Reactions(plugins, runs, self.execute_handler_once,
                                               self.own_writes).execute_handlers_once
        self._apply = application.apply
        self.worker = requeue.wrap_worker(queueing.worker, self._gone)
        self.watcher = requeue.wrap_watcher(queueing.watcher)  # its workers learn Kopf's pause
        self.index_resource = requeue.wrap_index_resource(indexing.index_resource)  # parents woken when the index knows
        self.continuous_watch = requeue.wrap_watch(watching.continuous_watch)  # what a watch still sends
        self.wait_for = readiness.wrap(aiotoggles.ToggleSet.wait_for)  # one waiter per toggle set
        self.revise_namespaces = listing.wrap_revise_namespaces(observation.revise_namespaces)
        self.allow_deletion = held.wrap(finalizers.allow_deletion)  # no release while a handler waits
        self.as_json_patch = held.wrap_json_patch(patches.Patch.as_json_patch)  # another shard's: no diff

    def attach(self) -> None:
        for module, name in self.originals:
            setattr(module, name, getattr(self, name))

    def detach(self) -> None:
        for (module, name), original in self.originals.items():
            setattr(module, name, original)

    def _gone(self, resource: Any, body: Mapping[str, Any]) -> None:
        """An object has left the cluster: the plugins that keep state per object forget it."""
        self.own_writes.gone(body)
        plugins = self.plugins
        if plugins.observes_gone:
            ref = kopf_runs.resource_ref(resource) if resource is not None else None
            engine.guarded(plugins, _LOGGER, "kopf_outcomes_object_gone",
                           lambda: plugins.hook.kopf_outcomes_object_gone(resource=ref, body=body), None)

    async def apply(self, **kwargs: Any) -> Any:
        """Kopf's apply, blind to our delays (:mod:`.delays`): no sleeping for them, no touch-dummy
        writes. A recheck due before Kopf's own delays sleeps here instead, and then runs again
        without a write (:mod:`.requeue`); one due later waits for the cycle after Kopf's wake-up."""
        patch = kwargs.get("patch")
        self.own_writes.restore(patch)  # a view older than our own write: its change cycle writes nothing
        ours = delays.take(patch)
        if ours is None:
            return self._remembered(kwargs, await self._apply(**kwargs))
        stock = kwargs["delays"] = delays.stock(kwargs.get("delays") or (), ours)
        if not ours.rechecks and not ours.wake:
            return self._remembered(kwargs, await self._apply(**kwargs))
        due = min(ours.rechecks) if ours.rechecks else None
        kopf_due = asyncio.get_running_loop().time() + min(stock) if stock else None
        if kopf_due is not None and not ours.wake and due is not None and kopf_due <= due:
            return self._remembered(kwargs, await self._apply(**kwargs))  # Kopf wakes first, as without us
        if kopf_due is not None:  # ours wake first, or any time: the next cycle computes Kopf's delays again
            due = kopf_due if due is None else min(due, kopf_due)
        kwargs["delays"] = []
        wake = asyncio.Event() if ours.wake else None
        forget = objects.wait(ours.wake, wake) if wake is not None else None
        try:
            if wake is not None and ours.moved is not None and ours.moved():
                wake.set()  # they changed while the handlers ran: no wake-up lost in between
            result = self._remembered(kwargs, await self._apply(**kwargs))
            # Also after a write: one that changes nothing brings no event to run the next cycle.
            await requeue.sleep_and_requeue(due, kwargs.get("stream_pressure"), wake)
        finally:
            if forget is not None:
                forget()
        return result

    def _remembered(self, kwargs: Mapping[str, Any], result: Any) -> Any:
        """Kopf's apply has written the cycle's patch: if it carried our memory, remember the
        resourceVersion the API server answered (Kopf's ``apply`` returns it where Kopf awaits its own
        write's event; 1.37's does not: nothing is remembered there), so that
        a view older than this write runs none of the object's handlers (:mod:`.own_writes`)."""
        patch, settings, body = kwargs.get("patch"), kwargs.get("settings"), kwargs.get("body")
        annotations = ((patch or {}).get("metadata") or {}).get("annotations") or {}
        if body is not None and settings is not None and KEYS[settings.persistence.finalizer].memory in annotations:
            returned = result[1] if isinstance(result, tuple) and len(result) == 3 else None
            self.own_writes.wrote(body, returned)
        return result
