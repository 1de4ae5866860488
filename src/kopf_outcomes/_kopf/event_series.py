"""
Outcome Events as series, as client-go's recorder makes them (``tools/record/events_cache.go``): a
repeat adds to its Event's ``count``, and similar Events are combined from the 10th distinct message
on (:data:`SIMILAR_EVENTS`, :data:`SIMILAR_INTERVAL`; what users see: docs/outcomes.md).

Kopf's ``kopf.event()`` can only create Events, so the series are posted here, with Kopf's own
API client (its credentials, retries and settings), in tasks beside the handler's: a failure to
post is logged and never touches the handling. Outside the event loop (a thread), or when Kopf's
client is unusable, the Event is left to ``kopf.event()``, unaggregated.
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime
import logging
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from kopf_outcomes import bounded
from kopf_outcomes._kopf.internals import OperatorSettings, kopf_api, kopf_api_errors

logger = logging.getLogger("kopf_outcomes.events")  # not Kopf's per-object logger: no Event about Events
MAX_SERIES = 4096  # series (and groups of similar Events) remembered, as client-go's LRU caches; oldest first
MAX_MESSAGE = 1024  # as Kopf cuts Event messages
SIMILAR_EVENTS = 10  # client-go's defaultAggregateMaxEvents
SIMILAR_INTERVAL = 600.0  # seconds, client-go's defaultAggregateIntervalInSeconds
COMBINED = "(combined from similar events): "  # client-go's EventAggregatorByReasonMessageFunc
clock: Callable[[], float] = time.monotonic


@dataclasses.dataclass
class Series:
    namespace: str
    name: str | None = None  # the Event's name, once created
    count: int = 0
    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    loop: asyncio.AbstractEventLoop = dataclasses.field(default_factory=asyncio.get_running_loop)


@dataclasses.dataclass
class Similar:
    """Events of one object, type and reason: their distinct messages, and when the last came."""
    messages: dict[str, None] = dataclasses.field(default_factory=dict)  # a set in insertion order
    last: float = 0.0


_series: collections.OrderedDict[Hashable, Series] = collections.OrderedDict()
_similar: collections.OrderedDict[tuple[str, str, str], Similar] = collections.OrderedDict()
_tasks: set[asyncio.Task[None]] = set()


def post(settings: OperatorSettings, ref: Mapping[str, Any], type_: str, reason: str, message: str) -> bool:
    """Post or count this Event in the background; False if it cannot be done here (no loop)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    message = message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE - 3] + "..."
    key, message = correlated(str(ref.get("uid")), type_, reason, message)  # now: in the order they came
    task = loop.create_task(_post(settings, dict(ref), key, type_, reason, message))
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
    return True


def correlated(uid: str, type_: str, reason: str, message: str) -> tuple[Hashable, str]:
    """The series an Event counts in, and its message, by client-go's EventAggregate: its own
    (object, type, reason, message), or, from the 10th distinct message of similar Events within
    10 minutes of each other, the one combined series of (object, type, reason)."""
    group = (uid, type_, reason)
    now = clock()
    similar = _similar.get(group)
    if similar is None or now - similar.last > SIMILAR_INTERVAL:
        similar = Similar()
    bounded.remember(_similar, group, similar, MAX_SERIES)
    similar.messages[message] = None
    similar.last = now
    if len(similar.messages) < SIMILAR_EVENTS:
        return (*group, message), message
    del similar.messages[next(iter(similar.messages))]  # client-go's PopAny: the set stays below the max
    return group, COMBINED + message


async def _post(settings: OperatorSettings, ref: dict[str, Any], key: Hashable, type_: str, reason: str,
                message: str) -> None:
    series = _series.get(key)
    if series is None or series.loop is not asyncio.get_running_loop():  # another operator's run
        series = Series(namespace=ref.get("namespace") or "default")
    bounded.remember(_series, key, series, MAX_SERIES)
    url = f"/api/v1/namespaces/{series.namespace}/events"
    now = datetime.datetime.now(datetime.timezone.utc).isoformat()
    try:
        async with series.lock:  # one request of a series at a time: counts never go back
            if series.name is not None:
                try:
                    await kopf_api.patch(
                        url=f"{url}/{series.name}", settings=settings, logger=logger,
                        headers={"Content-Type": "application/merge-patch+json"},
                        payload={"count": series.count + 1, "lastTimestamp": now, "message": message})
                    series.count += 1
                    return
                except kopf_api_errors.APINotFoundError:
                    series.name = None  # expired or deleted: a new series
            created = await kopf_api.post(url=url, settings=settings, logger=logger,
                                          headers={"Content-Type": "application/json"},
                                          payload=_body(settings, ref, series.namespace, type_, reason, message, now))
            series.name, series.count = created["metadata"]["name"], 1
    except Exception as e:  # auxiliary: never fail anything for an Event
        logger.warning(f"Failed to post an outcome Event ({type_} {reason} on {ref.get('kind')} "
                       f"{ref.get('namespace')}/{ref.get('name')}): {type(e).__name__}: {e}")


def _body(settings: OperatorSettings, ref: Mapping[str, Any], namespace: str, type_: str, reason: str,
          message: str, now: str) -> dict[str, Any]:
    """An Event as Kopf posts one (core/v1), with its count."""
    posting = settings.posting
    component = getattr(posting, "reporting_component", "kopf")
    return {
        "metadata": {"namespace": namespace, "generateName": getattr(posting, "event_name_prefix", "kopf-event-")},
        "action": "Action?", "type": type_, "reason": reason, "message": message,
        "reportingComponent": component, "reportingInstance": getattr(posting, "reporting_instance", "dev"),
        "source": {"component": component},
        "involvedObject": {**ref, "namespace": namespace},
        "firstTimestamp": now, "lastTimestamp": now, "eventTime": now, "count": 1,
    }

