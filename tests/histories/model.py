"""
The oracle: a small model of the documented rules (docs/outcomes.md, memory.md, policies.md,
safety.md; DESIGN.md §2, §5, §10), written here and kept independent of kopf_outcomes' code.

It answers three questions about a run it is told about: what the run may conclude (a set, where
the docs leave a choice open: the model is exact where they are exact and permissive where they
are not), which handler memory that leaves behind, and whether the handler already acted on the
state it sees. Nothing here imports kopf_outcomes.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

# What a run concludes, as the docs name it. "fatal_release"/"fatal_retain": a Fatal on deletion.
SUCCESS, PENDING, RETRY, RELEASE, RETAIN = "success", "pending", "retry", "fatal_release", "fatal_retain"
DONE = frozenset({SUCCESS, RELEASE})  # a deletion handler concluded so: its part of the finalizer may go
NOT_RUN = frozenset({"not run"})

# The known violations on main, each gated where it is triggered (see KNOWN_OPEN in test_histories).
OPTION_FIELDS = ("explicit_completion", "fatal_on_delete", "remember", "depends_on")
DEFAULTS: Mapping[str, Any] = {"explicit_completion": False, "fatal_on_delete": "release", "remember": False,
                               "depends_on": None}

# The fields the operator writes itself, which are never part of a handler's state (memory.md).
OWN_STATUS_PREFIXES = ("own-", "plugin-")
HANDLER_PREFIX = "hdl"  # handler ids start so: their results in status.<id> are the operator's own


@dataclasses.dataclass(frozen=True)
class HandlerSpec:
    id: str
    cause: str  # create, update, delete, resume
    options: Mapping[str, Any]  # @kopf_outcomes.handler_options(...): only the fields it sets
    retries: int | None = None
    subs: tuple[HandlerSpec, ...] = ()  # its sub-handlers ("<id>/<sub>"): it is done when they all are


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    defaults: Mapping[str, Any]  # options of the global scope
    handlers: Mapping[str, Mapping[str, Any]]  # options of handler scopes
    value_error: str | None = None  # exceptions."builtins.ValueError" = { outcome = ... } globally

    def option(self, handler: HandlerSpec, name: str) -> Any:
        """Precedence (policies.md): the decorator > the handler scope > the global scope > the default."""
        for scope in (handler.options, self.handlers.get(handler.id, {}), self.defaults):
            if scope.get(name) is not None:
                return scope[name]
        return DEFAULTS[name]


def concludes(behaviour: str, handler: HandlerSpec, policy: PolicySpec, faults: Mapping[str, str]) -> frozenset[str]:
    """What one run may conclude: the handler's own answer read by the documented rules, then the
    plugins' faults (a fault of a deciding hook is a Retry; an informing hook's is left out)."""
    fatal = RETAIN if policy.option(handler, "fatal_on_delete") == "retain" else RELEASE
    explicit = policy.option(handler, "explicit_completion")
    returned_plain = behaviour in ("true", "false", "none", "value")
    raised_plain = behaviour in ("temporary", "permanent", "other_error")
    own = {
        "success": {SUCCESS}, "pending": {PENDING}, "pending_recheck": {PENDING}, "raise_pending": {PENDING},
        "retry": {RETRY}, "raise_retry": {RETRY}, "fatal": {fatal}, "raise_fatal": {fatal},
        "fatal_retain": {RETAIN}, "fatal_release": {RELEASE},
        # on_delete set to a value that is neither: a fault, or ignored (the option applies)
        "fatal_bad": {RETRY, fatal},
        "temporary": {RETRY}, "permanent": {fatal},
        "other_error": {_ruled(policy.value_error, fatal)},
        "true": {SUCCESS} if explicit else {SUCCESS},
        "false": {PENDING} if explicit else {SUCCESS},
        "none": {RETRY} if explicit else {SUCCESS},
        "value": {RETRY} if explicit else {SUCCESS},
    }[behaviour]
    if returned_plain and faults.get("classify_result", "ok") != "ok":
        own = {RETRY}
    if raised_plain and faults.get("classify_exception", "ok") != "ok":
        own = {RETRY}
    adjust = faults.get("adjust_outcome", "ok")
    if adjust in ("raise", "not_outcome"):
        own = {RETRY}
    elif adjust == "fatal_bad":
        own = {RETRY, fatal}
    elif adjust == "success":
        own = {SUCCESS}
    if handler.cause == "delete" and faults.get("handler_options", "ok") != "ok":
        # A deletion whose options could not be read is held, the handler run again (safety.md); a
        # Pending keeps the finalizer anyway: it stands.
        own = {conclusion if conclusion == PENDING else RETRY for conclusion in own}
    if handler.cause != "delete":
        own = {RELEASE if conclusion == RETAIN else conclusion for conclusion in own}  # no finalizer of its own
    observe = faults.get("observe_outcome", "ok")
    if observe == "raise":
        own = own | {RETRY}  # the docs list it neither as deciding nor as informing: either reading
    elif observe == "finalizers":
        own = {RETRY}  # such a change is undone and the run retried (safety.md)
    return frozenset(own)


def _ruled(outcome: str | None, fatal: str) -> str:
    """A policy rule's outcome for the exception; without one, Kopf's default errors= mode (TEMPORARY)."""
    return {None: RETRY, "retry": RETRY, "pending": PENDING, "fatal": fatal, "success": SUCCESS}[outcome]


# --- the handler's memory: whether it acted on the state it sees (memory.md, issue 42) -----------

UNKNOWN = object()  # the model cannot say what the memory holds (a choice the docs leave open)


def remembered(previous: Any, conclusions: frozenset[str], state: Any, remember: bool,
               record_survives_retry: bool, kept: bool = False) -> Any:
    """The state the handler's record is about after a persisted run concluding one of ``conclusions``
    (None: no record). Pending and a retention are remembered (memory-annotation.md: "a record exists
    for a handler that is Pending or retained"), and with ``remember`` every outcome; a Success ends
    the record, and so does a released Fatal (or a person's release of a retention), unless it is
    ``kept`` (see :func:`keeps_ended_record`); any other outcome leaves it as it was, until the state
    changes (issue 42): a Retry about another state than the record's removes it (it concluded
    nothing about the record's state, nor about its own: ``acted: false``)."""
    effects = set()
    for conclusion in conclusions:
        if remember or conclusion in (PENDING, RETAIN) or (conclusion in DONE and kept):
            effects.add(("set", state))
        elif conclusion in DONE:
            effects.add(("set", None))
        elif conclusion == RETRY and record_survives_retry and previous is not UNKNOWN and previous != state:
            effects.add(("set", None))  # a Retry about another state removes the record (memory-annotation.md)
        elif record_survives_retry:
            effects.add(("keep", None))
        else:
            effects.add(("unknown", None))
    if len(effects) != 1:
        return UNKNOWN
    (kind, value), = effects
    return {"set": value, "keep": previous, "unknown": UNKNOWN}[kind]


def keeps_ended_record(written: bool, own_when_keyed: Any, own_now: Any) -> bool:
    """memory.md: a Success or a released Fatal (a person's release of a retention too) of a run given
    its key keeps its record, about its state, where its cycle ``written`` into that state, or where the
    operator's own writes in that state changed since its key was made (``own_when_keyed``: the view the
    key was made from; ``own_now``: the state as the cycle leaves it): a run again on it with no record
    would get another key, as a lost memory does. Only with the default scope (own writes are no part
    of a ``depends_on``): the caller asks only then."""
    return written or own_when_keyed != own_now


def own_writes(body: Mapping[str, Any]) -> Any:
    """The operator's own writes into the object's status (the handlers' ``own-…`` fields): part of the
    state kopf-outcomes keys, though never a change of it (memory.md), so the model's state leaves them out."""
    return _frozen({key: value for key, value in (body.get("status") or {}).items() if key.startswith("own-")})


def state_seen(body: Mapping[str, Any], depends_on: tuple[str, ...] | None) -> Any:
    """The part of the object a handler depends on, as the docs define it: spec, labels, annotations
    and status, minus what the operator writes itself (Kopf's and our annotations, status.kopf,
    handler results, own writes, plugin fields); or only the fields of ``depends_on``."""
    metadata = body.get("metadata", {})
    status = {key: value for key, value in (body.get("status") or {}).items()
              if key != "kopf" and not key.startswith(OWN_STATUS_PREFIXES) and not key.startswith(HANDLER_PREFIX)
              and not _kopf_status_storage(value)}
    whole = {
        "spec": body.get("spec") or {},
        "labels": dict(metadata.get("labels") or {}),
        "annotations": {key: value for key, value in (metadata.get("annotations") or {}).items()
                        if "kopf.zalando.org" not in key and key != "kubectl.kubernetes.io/last-applied-configuration"},
        "status": status,
    }
    if depends_on is None:
        return _frozen(whole)
    picked = {}
    for path in depends_on:
        value: Any = whole if not path.startswith("metadata.") else {"metadata": metadata}
        for part in path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        picked[path] = value
    return _frozen(picked)


def _kopf_status_storage(value: Any) -> bool:
    """memory.md: Kopf's status storages of any operator are no state, told by Kopf's field names and
    shapes together: ``progress`` (a mapping of records, or ``{}``), ``last-handled-configuration``
    (a string), and ``dummy`` (a string) beside either."""
    if not isinstance(value, Mapping) or not value or not set(value) <= {"progress", "last-handled-configuration",
                                                                          "dummy"}:
        return False
    progress, diffbase = value.get("progress"), value.get("last-handled-configuration")
    if progress is None and diffbase is None:
        return False
    records = progress is None or (isinstance(progress, Mapping)
                                   and all(isinstance(record, Mapping) for record in progress.values()))
    return records and (diffbase is None or isinstance(diffbase, str)) and isinstance(value.get("dummy", ""), str)


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((key, _frozen(item)) for key, item in value.items()))
    if isinstance(value, list):
        return tuple(_frozen(item) for item in value)
    return value
