"""
The state machine of the generated histories: an operator built from a generated description runs
Kopf's real ``process_resource_event`` against the one-object fake API server, while the history
changes the object, deletes it, restarts the operator, crashes it between two of its writes,
delivers events late, stale or coalesced, and makes the plugin fail. After every step the oracle
(:mod:`.model`) checks the three properties:

- P1: the finalizer goes only when every deletion handler's last persisted conclusion lets it go;
- P2 (at the end, after the world healed and time passed): an object whose deletion handlers all
  concluded is released;
- P3: a run's ``acted_on_this_state`` is what its memory must say (a side effect never starts twice
  for one state, nor is skipped for a new one), and its idempotency key is one per handler and state.
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
from collections.abc import Iterator
from typing import Any

import kopf
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import kopf_outcomes
from tests.histories import fake_api, kopf_access, model, operator
from tests.histories.clock import Clock
from tests.histories.known import KNOWN_OPEN

RELEASE_ANNOTATION = "outcomes.kopf.zalando.org/release"
MEMORY_ANNOTATION = "outcomes.kopf.zalando.org/memory"
DRAIN_CYCLES = 40  # P2's bound: cycles (with time passing when idle) for a concluded object to go


class Violation(AssertionError):
    pass


def _violated(machine: Histories, message: str) -> None:
    machine.violations.append(message)
    if machine.strict:
        raise Violation(message)


def _faults() -> dict[str, tuple[str, ...]]:
    faults = dict(operator.FAULTS)
    if "41-1" in KNOWN_OPEN:
        del faults["handler_options"]
    if "new-classify-fallthrough" in KNOWN_OPEN:
        del faults["classify_exception"]
    if "41-6" in KNOWN_OPEN:
        faults["adjust_outcome"] = tuple(mode for mode in faults["adjust_outcome"] if mode != "fatal_bad")
    return faults


def _behaviours() -> tuple[str, ...]:
    return tuple(b for b in operator.BEHAVIOURS if not (b == "fatal_bad" and "41-6" in KNOWN_OPEN))


def _behaviour_of(handler: model.HandlerSpec, behaviour: str, policy: model.PolicySpec) -> str:
    """The behaviour, unless it triggers a known open violation: a plain value that Kopf stores as
    the handler's result in ``status.<id>`` re-keys and wakes another handler, in whose cycle Kopf's
    progress does not list this one (new-results-rekey, see test_regressions)."""
    stored = behaviour in ("true", "false", "value") and not policy.option(handler, "explicit_completion")
    if "new-results-rekey" in KNOWN_OPEN and stored:
        return "success"
    return behaviour


OPTIONS = st.fixed_dictionaries({}, optional={
    "explicit_completion": st.booleans(),
    "fatal_on_delete": st.sampled_from(["release", "retain"]),
    "remember": st.booleans(),
    "depends_on": st.just(["spec.a"]),
})


@st.composite
def operators(draw: st.DrawFn) -> tuple[tuple[model.HandlerSpec, ...], model.PolicySpec, bool]:
    causes = draw(st.lists(st.sampled_from(["create", "update", "delete", "resume"]), min_size=0, max_size=3))
    causes = ["delete", *causes]
    handlers = tuple(_handler(draw, f"{model.HANDLER_PREFIX}{index}-{cause}", cause)
                     for index, cause in enumerate(causes))
    policy = model.PolicySpec(
        defaults=draw(OPTIONS),
        handlers={handler.id: draw(OPTIONS) for handler in handlers if draw(st.booleans())},
        value_error=draw(st.sampled_from([None, "retry", "pending", "fatal", "success"])))
    if "41-7" in KNOWN_OPEN and any(policy.option(handler, "remember") for handler in handlers):
        handlers = tuple(model.HandlerSpec(h.id, h.cause, h.options, None, h.subs) for h in handlers)
    return handlers, policy, draw(st.booleans())


def _handler(draw: st.DrawFn, hid: str, cause: str) -> model.HandlerSpec:
    subs = draw(st.sampled_from([0, 0, 0, 1, 2])) if cause == "delete" else 0
    if subs:  # a parent: its sub-handlers do the work (and Kopf's retries= would count the parent's runs)
        children = tuple(model.HandlerSpec(f"{hid}/s{index}", cause, {}) for index in range(subs))
        return model.HandlerSpec(hid, cause, draw(OPTIONS), None, children)
    return model.HandlerSpec(hid, cause, draw(OPTIONS), draw(st.sampled_from([None, None, 1, 3])))


def rule_unless(known: str, **arguments: Any) -> Any:
    """A rule, unless it triggers the known open violation ``known``: then a plain method (which the
    regression tests may still call)."""
    return rule(**arguments) if known not in KNOWN_OPEN else (lambda method: method)


class Histories(RuleBasedStateMachine):
    totals: collections.Counter[str] = collections.Counter()  # over every history of the process: the figures

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.api = fake_api.FakeAPI(on_release=self._released)
        self.loop = self.clock.loop()
        self.world = operator.World(behaviours={})
        self.handlers: tuple[model.HandlerSpec, ...] = ()
        self.policy = model.PolicySpec({}, {})
        self.with_plugin = False
        self.process: dict[str, Any] = {}
        self.status: dict[str, frozenset[str]] = {}  # deletion handlers: their last persisted conclusion
        self.records: dict[str, Any] = {}  # the state each handler's memory is about (None: no memory)
        self.garbled: list[int] = []  # the versions where someone wrote garbage into the memory
        self.unrecorded: set[str] = set()  # handlers whose record was lost, not run since (memory.md)
        # (handler, state) → its key, and the operator's own writes in the view it was made from
        self.keys: dict[tuple[str, Any], tuple[str, Any]] = {}
        self.keys_given: dict[tuple[str, Any], set[str]] = collections.defaultdict(set)  # every key a state had
        # Records written by a run on an older view: the operator's own writes in that view (the record's
        # digest is of the state as that view shows it, which the object may not show with them)
        self.old_view_records: dict[str, Any] = {}
        self.released_by_person: set[str] = set()
        # Deletion handlers whose conclusion on an old view was refused where the object shows them not
        # waiting: Kopf keeps its refused removal of the finalizer in the process, to land (safety.md)
        self.landing: dict[str, frozenset[str]] = {}
        self.unreadable_released = False
        self.tries: collections.Counter[str] = collections.Counter()  # persisted runs: at least Kopf's retries
        self.release_raced = False
        self.releases: list[str] = []  # the release annotations set, in order
        self.release_seen = False
        self.steps = 0
        self.saw_stale = False  # a cycle ran on an old view (stale-view open): the memory is unknown after it
        self.strict = True  # raise at the first violation (False: collect them, for a replay)
        self.violations: list[str] = []
        self._context = self._installed()
        self._context.__enter__()

    # --- the environment -----------------------------------------------------------------------

    def _installed(self) -> Any:
        @contextlib.contextmanager
        def installed() -> Iterator[None]:
            original_patch = kopf_access.api.patch
            quiet = [logging.getLogger(name) for name in ("kopf", "kopf_outcomes")]
            levels = [(logger, logger.level, logger.propagate) for logger in quiet]
            for logger in quiet:
                logger.setLevel(logging.CRITICAL + 1)
                logger.propagate = False
            kopf_access.api.patch = self.api.patch
            try:
                with self.clock.installed():
                    yield
            finally:
                kopf_access.api.patch = original_patch
                for logger, level, propagate in levels:
                    logger.setLevel(level)
                    logger.propagate = propagate
                kopf_outcomes.uninstall()
        return installed()

    def teardown(self) -> None:
        try:
            if self.handlers:
                self._drain()
        finally:
            self.totals.update(histories=1, cycles=self.steps, runs=len(self.world.runs),
                               released=int(self.api.body is None and self.api.kopf_writes > 0))
            self._context.__exit__(None, None, None)
            self.loop.close()

    def _start(self) -> None:
        """A fresh operator process: Kopf's memories and our caches anew, the object listed again."""
        kopf_outcomes.uninstall()
        self.world.options_cached.clear()  # a new process asks the plugins again
        self.landing.clear()  # Kopf's refused removal was in the old process only
        plugins = [operator.FaultyPlugin(self.world)] if self.with_plugin else []
        has_policy = bool(self.policy.defaults or self.policy.handlers or self.policy.value_error)
        kopf_outcomes.install(entry_points=False, events=False, plugins=plugins,
                              policy=operator.policy_of(self.policy) if has_policy else None)
        self.process = dict(
            registry=operator.registry_of(self.handlers, self.policy, self.world),
            settings=kopf_access.configuration.OperatorSettings(),
            memories=kopf_access.inventory.ResourceMemories(),
            memobase=kopf_access.ephemera.Memo(),
            indexers=kopf_access.indexing.OperatorIndexers(),
        )
        self.worker = kopf_access.worker_context(self.process["registry"])
        self.api.queue = [fake_api.Event(None, self.api.body)] if self.api.body is not None else []
        self.expected_version: str | None = None  # Kopf's worker awaits its own write's version
        self.consistency_time: float | None = None

    def _released(self) -> None:
        self.release_seen = True

    # --- the history ---------------------------------------------------------------------------

    @initialize(spec=operators(), behaviours=st.lists(st.sampled_from(_behaviours()), min_size=6, max_size=6))
    def start(self, spec: Any, behaviours: list[str]) -> None:
        self.handlers, self.policy, self.with_plugin = spec
        for handler, behaviour in zip(self.leaves, behaviours, strict=False):
            self.world.behaviours[handler.id] = _behaviour_of(handler, behaviour, self.policy)
        self.api.create({"a": 0, "b": 0})
        self._start()
        for _ in range(6):  # the operator has seen the object: its finalizer added, its creation handled
            if self.api.queue:
                self._cycle(self.api.queue.pop(0), None)

    @precondition(lambda self: self.api.queue)
    @rule(count=st.integers(1, 4), latest=st.booleans(), crash=st.sampled_from([None, None, None, None, 0, 1, 2]))
    def deliver(self, count: int, latest: bool, crash: int | None) -> None:
        """The next ``count`` watch events, as Kopf's worker takes them (waiting for its own write's
        version to arrive); or only the latest of those queued (intermediate states unobserved: a
        relist). The operator dies at the ``crash``-th write of the last one (None: it does not)."""
        for left in reversed(range(count)):
            if not self.api.queue:
                return
            event = self.api.queue.pop(-1 if latest else 0)
            if latest:
                self.api.queue.clear()
            self._cycle(event, crash if left == 0 or len(self.api.queue) == 0 else None)

    @precondition(lambda self: len(self.api.versions) > 1)
    @rule(back=st.integers(1, 8))
    def deliver_stale(self, back: int) -> None:
        """An event older than one already seen (``back`` versions before the latest): a watch of a
        lagging API server after a failover, past Kopf's wait for its own write."""
        body = self.api.versions[max(0, len(self.api.versions) - 1 - back)]
        self._cycle(fake_api.Event("MODIFIED", body), None, stale="stale-view" in KNOWN_OPEN, old_view=True)

    @rule(seconds=st.sampled_from([1, 6, 61, 700, 86400]))
    def time_passes(self, seconds: int) -> None:
        """Time passes, and the object's last event is queued again (as a recheck or a relist does)."""
        self.clock.advance(seconds)
        if self.api.body is not None:
            self.api.queue.append(fake_api.Event("MODIFIED", self.api.body))

    @rule(field=st.sampled_from(["spec.a", "spec.b", "labels", "annotations", "status"]), value=st.integers(0, 2))
    def user_changes(self, field: str, value: int) -> None:
        patch = {"spec.a": {"spec": {"a": value}}, "spec.b": {"spec": {"b": value}},
                 "labels": {"metadata": {"labels": {"example.com/l": str(value)}}},
                 "annotations": {"metadata": {"annotations": {"example.com/note": str(value)}}},
                 "status": {"status": {"user": value}}}[field]
        self.api.user_patch(patch)

    @rule_unless("42-4")
    def another_operator_writes_its_bookkeeping(self) -> None:
        """Another Kopf operator's progress in a status storage of its own (several-operators.md)."""
        self.api.user_patch({"status": {"b-op": {"progress": {"x": {"started": str(self.steps)}}}}})
        self.steps += 1

    @rule()
    def delete(self) -> None:
        self.api.delete()

    @rule()
    def restart(self) -> None:
        self.totals.update(restarts=1)
        self._start()

    @rule(index=st.integers(0, 5), behaviour=st.sampled_from(_behaviours()))
    def behaviour_changes(self, index: int, behaviour: str) -> None:
        handler = self.leaves[index % len(self.leaves)]
        self.world.behaviours[handler.id] = _behaviour_of(handler, behaviour, self.policy)

    @rule_unless("42-2", index=st.integers(0, 5))
    def handler_writes_its_own_status(self, index: int) -> None:
        self.world.own_writes ^= {self.leaves[index % len(self.leaves)].id}

    @rule(fault=st.sampled_from([(hook, mode) for hook, modes in sorted(_faults().items()) for mode in modes]))
    def plugin_fault_changes(self, fault: tuple[str, str]) -> None:
        hook, mode = fault
        self.world.faults[hook] = mode

    @precondition(lambda self: self.api.body is not None)
    @rule(index=st.integers(0, 2))
    def person_releases(self, index: int) -> None:
        """A person releases as the docs say: the retained handler's id with the stamp its retention
        shows (``why``, the log); ``*``, or a handler that shows no retention, without a stamp."""
        names = ["*", *(h.id for h in self._deletion_handlers())]
        name = names[index % len(names)]
        stamps = self._stamps_shown()
        value = ",".join(f"{h}@{stamps[h]}" for h in sorted(stamps) if name in ("*", h)) or name
        # Set while older events wait, it may meet a retention made on a view without it (release-race).
        self.release_raced = self.release_raced or bool(self.api.queue)
        self.api.user_patch({"metadata": {"annotations": {RELEASE_ANNOTATION: value}}})
        self.releases.append(value)
        self._count_releases()

    def _retentions_shown(self) -> set[str]:
        """The handlers the object shows retained now."""
        return {hid for hid, record in self._records_shown().items()
                if isinstance(record, dict) and record.get("outcome") == "retained"}

    def _stamps_shown(self) -> dict[str, str]:
        """The retentions the object shows now, by handler: the stamps a release must carry."""
        records = self._records_shown()
        return {hid: record["stamp"] for hid, record in records.items() if isinstance(record, dict)
                and record.get("outcome") == "retained" and isinstance(record.get("stamp"), str)}

    def _count_releases(self) -> None:
        """The handlers a person's releases answer: the retentions whose stamp a release carries
        (only a person who saw that retention can have written it); with release-race open, where a
        retention may have been made on a view older than the release (a stale cycle, or events older
        than it still queued), any unstamped one it names that may be retained."""
        racing = "release-race" in KNOWN_OPEN and (self.saw_stale or self.release_raced)
        for value in self.releases:
            for entry in value.split(","):
                name, stamped, _ = entry.partition("@")
                for handler in self._deletion_handlers():
                    if name in ("*", handler.id) and (stamped or racing) and model.RETAIN in self._possible(handler):
                        self.released_by_person.add(handler.id)

    @precondition(lambda self: self.api.body is not None)
    @rule()
    def memory_garbled(self) -> None:
        """Someone writes garbage into the memory: it reads as no memory (safety.md)."""
        self.api.user_patch({"metadata": {"annotations": {MEMORY_ANNOTATION: "{garbage"}}})
        self.records = {handler.id: None for handler in self.leaves}
        self.garbled.append(self.api.version)
        self.unrecorded |= {handler.id for handler in self.leaves}
        self.landing.clear()  # an unreadable memory holds Kopf's removal (safety.md)
        if any(key.startswith("own-") for key in (self.api.body or {}).get("status") or {}):
            # memory.md: a lost memory keys the state as it is now, the operator's own writes in it
            self.keys = {seen: key for seen, key in self.keys.items() if seen[0] not in self.records}

    # --- one processing cycle, and what the oracle makes of it -----------------------------------

    def _cycle(self, event: fake_api.Event, crash: int | None, stale: bool = False, old_view: bool = False) -> None:
        """One event through Kopf's processing, as Kopf's per-object worker feeds it (queueing.py):
        after its own PATCH it awaits that version, so an older event only waits (and is woken by
        the next queued one) unless none comes within ``consistency_timeout``. An ``old_view`` is
        older than one already seen (a lagging API server)."""
        self.steps += 1
        self.unreadable_released = self._unreadable_released()
        seen = int(event.object["metadata"].get("resourceVersion", 0))
        if any(seen < version for version in self.garbled):
            stale = old_view = True  # a view from before the garbage: its write may put the old records back
        recorded = self._records_shown()
        retained = self._retentions_shown()
        for handler_id in self._waits_shown():  # a wait shown again (an old view's write put it back) holds
            self.landing.pop(handler_id, None)
        self.api.writes_left = crash
        writes_before, runs_before = self.api.kopf_writes, len(self.world.runs)
        refused_before, version_before = self.api.refused, self.api.version
        self.release_seen = False
        crashed = False
        if event.object["metadata"].get("resourceVersion") == self.expected_version:
            self.expected_version, self.consistency_time = None, None  # Kopf's own write arrived
        pressure = asyncio.Event()
        if self.api.queue:
            pressure.set()
        try:
            processing = kopf_access.processing.process_resource_event(
                lifecycle=kopf.lifecycles.all_at_once, resource=kopf_access.RESOURCE, raw_event=event.raw(),
                event_queue=asyncio.Queue(), no_throttling=True, stream_pressure=pressure,
                consistency_time=self.consistency_time, **self.process)
            version = self.loop.run_until_complete(self.worker.run(self.loop.create_task, processing))
            if version is not None:
                self.expected_version = version
                self.consistency_time = self.loop.time() + self.process["settings"].persistence.consistency_timeout
        except fake_api.Crashed:
            crashed = True
            self.totals.update(crashes=1)
        finally:
            self.api.writes_left = None
        persisted = not crashed or self.api.kopf_writes > writes_before
        refused = self.api.refused > refused_before and self.api.version == version_before
        runs = self.world.runs[runs_before:]
        written = any(run.handler in self.world.own_writes for run in runs)  # the cycle's own writes
        own_in_view = any(key.startswith("own-") for key in event.object.get("status") or {})
        for run in runs:
            if run.handler in self.unrecorded and not old_view:  # its first run since its record was lost
                # (a view from before the loss shows the record: the loss is not yet its memory)
                self.unrecorded.discard(run.handler)
                if own_in_view:  # memory.md: a lost memory keys the state as it is now, own writes in it
                    self.keys = {seen: key for seen, key in self.keys.items() if seen[0] != run.handler}
            # Its write refused (an old view's): a conclusion about another state than the object shows
            # is in it nowhere (safety.md: only one about the state it shows is run again, to land).
            lost = old_view and refused and run.state != self._state_shown(run.handler)
            concluded = self._judge(run, persisted and not lost, stale, written, old_view)
            if lost and persisted and run.handler not in self._waits_shown():
                # safety.md: where the object shows it not waiting, the refused conclusion is Kopf's, which
                # applies its refused removal at a next cycle, before any handler runs, as stock Kopf does
                self.landing[run.handler] = concluded
        if old_view:
            shown = self._records_shown()  # a record gone, or put back as the old view shows it, is lost
            self._lost({hid for hid, record in recorded.items() if shown.get(hid) != record}
                       - {run.handler for run in runs})
        else:
            self._release_concluded(retained - self._retentions_shown() - {run.handler for run in runs}, event, written)
        for handler_id in self._retentions_shown() - retained - {run.handler for run in runs}:
            self.records[handler_id] = model.UNKNOWN  # Kopf's retries= used up before a run: retained, unseen
        if stale:  # its write, made from an old view, may have put old records (and Kopf's progress) back:
            self.saw_stale = True  # what the memory holds is unknown from now on
        if self.saw_stale or self.release_raced:
            self._count_releases()  # a retention of this cycle may have been made on a view without them
        if self.release_seen:
            self._check_release()
        if crashed:
            self._start()

    def _state_shown(self, handler_id: str) -> Any:
        """The handler's state as the object shows it now."""
        return self._state_in(next(h for h in self.leaves if h.id == handler_id), self.api.body)

    def _waits_shown(self) -> set[str]:
        """The handlers the object's memory shows waiting (memory-annotation.md: pending, a retry after
        it, a retention), or all where it cannot be read: those hold Kopf's removal (safety.md)."""
        annotations = (self.api.body or {}).get("metadata", {}).get("annotations") or {}
        try:
            records = json.loads(annotations.get(MEMORY_ANNOTATION) or "{}")
        except ValueError:
            return {handler.id for handler in self.leaves}
        if not isinstance(records, dict):
            return {handler.id for handler in self.leaves}
        return {hid for hid, record in records.items()
                if isinstance(record, dict) and record.get("outcome") in ("pending", "retry", "retained")}

    def _records_shown(self) -> dict[str, Any]:
        """The handler records the object's memory shows now (none where it is unreadable)."""
        annotations = (self.api.body or {}).get("metadata", {}).get("annotations") or {}
        try:
            records = json.loads(annotations.get(MEMORY_ANNOTATION) or "{}")
        except ValueError:
            return {}
        return records if isinstance(records, dict) else {}

    def _release_concluded(self, handlers: set[str], event: fake_api.Event, written: bool) -> None:
        """A person's release concluded (its PATCH landed: the retention is gone, the handler not run):
        the record ends as a released Fatal's does (memory.md), kept where the cycle writes into its
        state or where the operator's own writes changed that state since it was keyed."""
        for handler_id in handlers:
            handler = next(h for h in self.leaves if h.id == handler_id)
            previous, state = self.records.get(handler_id), self._state_in(handler, event.object)
            if previous is model.UNKNOWN:
                continue
            self.records[handler_id] = model.remembered(
                previous, frozenset({model.RELEASE}), state, self.policy.option(handler, "remember"),
                record_survives_retry=True, kept=previous == state and self._kept(handler, state, written,
                                                                                  model.own_writes(event.object)))

    def _kept(self, handler: model.HandlerSpec, state: Any, written: bool, own_now: Any) -> bool:
        """Whether a Success's or released Fatal's record about ``state`` is kept (model.keeps_ended_record)."""
        keyed = self.keys.get((handler.id, state))
        return (self.policy.option(handler, "depends_on") is None and keyed is not None
                and model.keeps_ended_record(written, keyed[1], own_now))

    def _state_in(self, handler: model.HandlerSpec, body: Any) -> Any:
        return model.state_seen(body or {}, self.policy.option(handler, "depends_on"))

    def _lost(self, handlers: set[str]) -> None:
        """A cycle on an old view wrote the memory as that view showed it: the records written after
        that view, of handlers it did not run, are lost (safety.md), whether that view shows none or an
        older one (about the state before the operator's later own writes). A lost memory keys the state
        as it is now (memory.md): where the operator's own writes are in it, those handlers are re-keyed."""
        if handlers and any(key.startswith("own-") for key in (self.api.body or {}).get("status") or {}):
            self.keys = {seen: key for seen, key in self.keys.items() if seen[0] not in handlers}
        self.unrecorded |= handlers

    @property
    def leaves(self) -> list[model.HandlerSpec]:
        """The handlers that do the work: those without sub-handlers, and the sub-handlers."""
        return [leaf for handler in self.handlers for leaf in (handler.subs or (handler,))]

    def _deletion_handlers(self) -> list[model.HandlerSpec]:
        """A parent is done when its sub-handlers are: the deletion's leaves decide the finalizer."""
        return [handler for handler in self.leaves if handler.cause == "delete"]

    def _judge(self, run: operator.Run, persisted: bool, stale: bool = False, written: bool = False,
               old_view: bool = False) -> frozenset[str]:
        """Check the run (P3) and take its conclusion where it persisted; return what it may conclude."""
        handler = next(h for h in self.leaves if h.id == run.handler)
        key, keyed_own = self.keys.get((run.handler, run.state), (run.key, run.own))
        given = self.keys_given[run.handler, run.state]
        given.add(key)
        # safety.md, where a state may get another key: an older view shows a memory from before (with a
        # key it gave this state then); a view whose own writes differ from those the key was made with,
        # where no record shown carries that key (an older view, or a record about another state)
        unkept = (old_view or self.records.get(run.handler) != run.state
                  or self.old_view_records.get(run.handler, run.own) != run.own)
        rekeyed = (old_view and run.key in given) or (unkept and run.own != keyed_own)
        if key != run.key and rekeyed:
            if persisted:
                self.keys[run.handler, run.state] = (run.key, run.own)  # its record carries this one now
        elif key != run.key:  # always: a stale view keeps it too (a record it loses is _lost's, above)
            _violated(self, f"P3: {run.handler}'s idempotency key changed for an unchanged state: {key} → {run.key}")
        else:
            self.keys.setdefault((run.handler, run.state), (run.key, run.own))
        given.add(run.key)
        expected = model.UNKNOWN if stale or self.saw_stale else self.records.get(run.handler)
        if expected is not model.UNKNOWN:
            acted = expected is not None and expected == run.state
            if run.acted != acted:
                _violated(self, f"P3: {run.handler} ran ({run.behaviour}) with acted_on_this_state={run.acted}, "
                                f"but its memory {'is' if acted else 'is not'} about the state it sees"
                                + (": its side effect starts twice" if acted else ": its side effect never starts"))
        concluded = self._exhausted(handler, run, model.concludes(run.behaviour, handler, self.policy,
                                                                  run.faults if self.with_plugin else {}))
        if persisted:
            if old_view:
                self.old_view_records[run.handler] = run.own
            else:
                self.old_view_records.pop(run.handler, None)
            self.tries[run.handler] += 1
            self.records[run.handler] = model.remembered(
                expected, concluded, run.state, self.policy.option(handler, "remember"),
                record_survives_retry="42-1" not in KNOWN_OPEN,
                kept=self._kept(handler, run.state, written, run.own))
            if handler.cause == "delete":
                self.status[run.handler] = concluded
                self.released_by_person.discard(run.handler)
                self.landing.pop(run.handler, None)
        return concluded

    def _exhausted(self, handler: model.HandlerSpec, run: operator.Run, concluded: frozenset[str]) -> frozenset[str]:
        """A Retry that uses up Kopf's ``retries=`` is a final failure (a Fatal: released, or retained) at
        that run. Only the handler's own Retry counts (a plugin's fault holds, uncounted): with ``retries=1``
        such a Retry is that Fatal; where the count may be reached, or the Retry may be a fault's, either."""
        if handler.retries is None or model.RETRY not in concluded or self.tries[handler.id] + 1 < handler.retries:
            return concluded
        fatal = model.concludes("fatal", handler, self.policy, {})
        counted = run.behaviour in ("retry", "raise_retry", "temporary") and not (
            self.with_plugin and any(mode != "ok" for mode in run.faults.values()))
        return (concluded - {model.RETRY}) | fatal if counted and handler.retries == 1 else concluded | fatal

    def _possible(self, handler: model.HandlerSpec) -> frozenset[str]:
        """What the handler's last persisted conclusion may be: with Kopf's ``retries=``, also the Fatal
        that Kopf concludes, without a run, once they are used up (released, or retained)."""
        concluded = self.status.get(handler.id, model.NOT_RUN)
        if handler.retries is not None:
            fatal = model.RETAIN if self.policy.option(handler, "fatal_on_delete") == "retain" else model.RELEASE
            concluded |= {fatal}
        return concluded

    def _unreadable_released(self) -> bool:
        """Whether the object shows a memory that cannot be read and a person's release ``*``: the way
        out that held.py documents (an unreadable memory holds until it is fixed, removed, or ``*``)."""
        annotations = (self.api.body or {}).get("metadata", {}).get("annotations") or {}
        names = {entry.partition("@")[0] for entry in str(annotations.get(RELEASE_ANNOTATION) or "").split(",")}
        try:
            json.loads(annotations.get(MEMORY_ANNOTATION) or "{}")
        except ValueError:
            return "*" in names
        return False

    def _may_go(self, handler: model.HandlerSpec) -> bool:
        if self.unreadable_released:  # the cycle began on a view whose unreadable memory a person released
            return True
        possible = self._possible(handler)
        if possible & model.DONE or self.landing.get(handler.id, frozenset()) & model.DONE:
            return True
        if model.RETAIN in possible and handler.id in self.released_by_person:
            return True
        # a release annotation left from before this retention: consumed once 42-6 is fixed
        return (model.RETAIN in possible and "42-6" in KNOWN_OPEN
                and any(name in ("*", handler.id) for name in self.releases))

    def _check_release(self) -> None:
        holding = [handler.id for handler in self._deletion_handlers() if not self._may_go(handler)]
        if holding:
            _violated(self, f"P1: the finalizer was released while {', '.join(holding)} had not concluded: "
                            + ", ".join(f"{h}: {sorted(self.status.get(h, model.NOT_RUN))}" for h in holding))

    # --- the end: heal the world, let time pass, and require that the concluded object goes -------

    def _drain(self) -> None:
        self.world.faults.clear()
        self.api.delete()
        idle = 0
        for _ in range(DRAIN_CYCLES):
            if self.api.body is None:
                return
            if not self.api.queue:
                idle += 1
                if idle > 3:
                    break  # nothing happens any more, however much time passes
                self.clock.advance(700)
                self.api.queue.append(fake_api.Event("MODIFIED", self.api.body))
            else:
                idle = 0
            event = self.api.queue.pop()
            self.api.queue.clear()
            self._cycle(event, None)
        if self.api.body is not None and self.api.finalized:
            shown_retained = set(self._stamps_shown()) if "stale-view-retained" in KNOWN_OPEN else set()
            concluded = [h for h in self._deletion_handlers() if self.status.get(h.id, model.NOT_RUN) <= model.DONE
                         and h.id not in shown_retained]
            if len(concluded) == len(self._deletion_handlers()):
                _violated(self, f"P2: every deletion handler concluded ({self.status}), but the object still has "
                                f"the finalizer after {DRAIN_CYCLES} cycles")

    @invariant()
    def nothing_else(self) -> None:
        pass


@contextlib.contextmanager
def replayed(handlers: tuple[model.HandlerSpec, ...], behaviours: list[str], *,
             policy: model.PolicySpec | None = None, plugin: bool = False) -> Iterator[Histories]:
    """One history written by hand, for the regression tests: its steps are the machine's rules,
    called in order; a violation raises at the step (or, for P2, at the end) where it happens."""
    machine = Histories()
    try:
        machine.start(spec=(handlers, policy or model.PolicySpec({}, {}), plugin), behaviours=behaviours)
        yield machine
    except BaseException:
        machine.handlers = ()  # no drain after a failure: the failure is the answer
        raise
    finally:
        machine.teardown()
