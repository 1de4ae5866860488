"""
Outcome Events as series, as client-go's recorder makes them: the first Event of one reason and
type on one object is created; each repeat adds to that Event's ``count`` and moves its
``lastTimestamp`` and message (one PATCH), instead of a new Event per attempt. A Retry every 5
seconds is then one Event counting its attempts, not 60 Events a minute. An Event that is gone
(Events expire, an hour by default) starts a new series.

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
from collections.abc import Mapping
from typing import Any

from kopf_outcomes._kopf.internals import OperatorSettings, kopf_api, kopf_api_errors

logger = logging.getLogger("kopf_outcomes.events")  # not Kopf's per-object logger: no Event about Events
MAX_SERIES = 4096  # objects × reasons remembered; the oldest series is forgotten first
MAX_MESSAGE = 1024  # as Kopf cuts Event messages


@dataclasses.dataclass
class Series:
    namespace: str
    name: str | None = None  # the Event's name, once created
    count: int = 0
    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    loop: asyncio.AbstractEventLoop = dataclasses.field(default_factory=asyncio.get_running_loop)


_series: collections.OrderedDict[tuple[str, str, str], Series] = collections.OrderedDict()
_tasks: set[asyncio.Task[None]] = set()


def post(settings: OperatorSettings, ref: Mapping[str, Any], type_: str, reason: str, message: str) -> bool:
    """Post or count this Event in the background; False if it cannot be done here (no loop)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    task = loop.create_task(_post(settings, dict(ref), type_, reason, message))
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
    return True


async def _post(settings: OperatorSettings, ref: dict[str, Any], type_: str, reason: str, message: str) -> None:
    key = (str(ref.get("uid")), type_, reason)
    series = _series.get(key)
    if series is None or series.loop is not asyncio.get_running_loop():  # another operator's run
        series = _series[key] = Series(namespace=ref.get("namespace") or "default")
        while len(_series) > MAX_SERIES:
            _series.popitem(last=False)
    _series.move_to_end(key)
    message = message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE - 3] + "..."
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

