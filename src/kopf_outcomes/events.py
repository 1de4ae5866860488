"""
Kubernetes Events with a reason per outcome, instead of Kopf's generic ``Logging``.

The core logs each conclusion once through Kopf's per-object logger, with the outcome as a field
of the record (``outcome``: success, pending, retry, retained, fatal). A filter on Kopf's
``kopf.objects`` logger posts such a record as an Event through Kopf's public ``kopf.event()``,
with a reason of its own (:data:`REASONS`) and the type Kopf gives the level (INFO ``Normal``,
WARNING ``Warning``, ERROR ``Error``), and marks the record so that Kopf does not post it again
as ``Logging``. A conclusion that holds is logged at DEBUG (a quiet recheck), below Kopf's
posting level (``settings.posting.level``, INFO by default): it posts nothing. Outcome lines are
log lines: where Kopf posts none of those (``settings.posting.loggers`` off, Kopf's default since
1.44), they post none either. Posted anyway, they cost a waiting operator about 27 KiB of memory per
object (issue 33: Kopf posts each object's Events from a worker of its own, each on a TLS
connection of its own, all at once when many objects park), and the API server an Event each.

Kopf's posting settings are the user's switch for these Events too: nothing is posted with
``settings.posting.enabled = False``, nor below ``settings.posting.level``. Repeats (one object,
type, reason and message) are one Event whose ``count`` grows, and similar ones (another message)
are combined after 10 within 10 minutes, as client-go's recorder does
(:mod:`kopf_outcomes._kopf.event_series`, given to :func:`enable`), not one Event per attempt.

Records of stock Kopf (no ``outcome`` field) are left as they are. ``install(events=False)`` or
``KOPF_OUTCOMES_EVENTS=0`` turns this off: the lines are then posted as Kopf posts log lines.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any, cast

import kopf

REASONS = {
    "success": "Succeeded",
    "pending": "Pending",
    "retry": "Retrying",
    "retained": "FinalizerRetained",
    "fatal": "Failed",
}
LOGGER = "kopf.objects"  # Kopf's per-object logger: every outcome line goes through it


def event_type(level: int) -> str:
    """Kopf's own mapping of a log level to an Event type (its K8sPoster's)."""
    return ("Normal" if level <= logging.INFO else "Warning" if level <= logging.WARNING
            else "Error" if level <= logging.ERROR else "Fatal")


class OutcomeEvents(logging.Filter):
    """Posts outcome lines as Events with their reason; never drops a record from the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        outcome = getattr(record, "outcome", None)
        if outcome is None:
            return True  # not an outcome line (Kopf's own, every other one): the hot path
        reason = REASONS.get(str(outcome))
        ref = getattr(record, "k8s_ref", None)
        settings = getattr(record, "settings", None)
        if reason is None or not isinstance(ref, dict) or getattr(record, "k8s_skip", False):
            return True
        posting = getattr(settings, "posting", None)
        if posting is None or record.levelno < posting.level or not getattr(posting, "loggers", True):
            return True  # nothing to post: as Kopf would do (Kopf >= 1.44 posts log lines only when asked)
        if not posting.enabled:
            record.k8s_skip = True  # the user switched Events off: none, neither ours nor Kopf's
            return True
        type_, message = event_type(record.levelno), record.getMessage()
        if _series is None or not _series(settings, ref, type_, reason, message):
            body = {"apiVersion": ref.get("apiVersion"), "kind": ref.get("kind"),
                    "metadata": {"name": ref.get("name"), "uid": ref.get("uid"), "namespace": ref.get("namespace")}}
            try:
                kopf.event(kopf.Body(cast(Any, body)), type=type_, reason=reason, message=message)
            except LookupError:  # outside an operator's tasks (no event queue): leave it to Kopf
                return True
        record.k8s_skip = True  # not also as Kopf's generic "Logging" Event
        return True


# Posts (or counts) one Event of a series; False if it cannot here. Given by the installation.
SeriesPoster = Callable[[Any, Mapping[str, Any], str, str, str], bool]
_FILTER = OutcomeEvents()
_wanted = False  # enabled; the filter goes on Kopf's logger with the first outcome line (attach)
_series: SeriesPoster | None = None


def enable(on: bool, series: SeriesPoster | None = None) -> None:
    """Post outcome Events (unless ``KOPF_OUTCOMES_EVENTS=0``), or stop posting them. Idempotent.
    Nothing is attached to Kopf's logger until an outcome line is about to be logged: an operator
    that uses no outcome (stock parity) runs no filter on any of its log records. ``series``
    aggregates repeats; without it, each Event is posted with ``kopf.event()``."""
    global _wanted, _series
    _wanted = on and os.environ.get("KOPF_OUTCOMES_EVENTS", "1") != "0"
    _series = series
    if not _wanted:
        logging.getLogger(LOGGER).removeFilter(_FILTER)


def attach() -> None:
    """Before an outcome line is logged: the filter on Kopf's logger, if enabled and not yet there."""
    if _wanted:
        logger = logging.getLogger(LOGGER)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
