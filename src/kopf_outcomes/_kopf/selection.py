"""
What the API server sends of a resource to the operator's watch where Kopf asks it to select (Kopf
1.45's ``settings.watching`` selectors): an object outside the selection is never seen, so it is never
read as "none" (``dependents.take``), and one that left it unseen is not rechecked on its last state
(``requeue``). Whether an object is still selected is read off the watch itself, with no request per
recheck (:class:`Listings`).
"""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any, NamedTuple

from kopf_outcomes._kopf.internals import kopf_api, watching

_LOGGER = logging.getLogger("kopf_outcomes")


class Selection(NamedTuple):
    """What Kopf asks the API server to send of a resource (Kopf 1.45's ``settings.watching``):
    its label and field selectors as Kopf joins them, and its shard selector."""

    labels: str
    fields: str
    shard: str

    def __str__(self) -> str:
        return " and ".join(f"{name} {value!r}" for name, value in zip(self._fields, self, strict=True) if value)


# Our indices whose resource the API server selects for the operator, with what it sends of it: what
# they hold may be a part of what handlers wait for.
selected: dict[str, Selection] = {}


def server_selection(settings: Any, resource: Any) -> Selection:
    """What Kopf's watch of the resource asks the API server for, as Kopf builds its query
    (``watching.watch_objs``); nothing before Kopf 1.45."""
    watching = getattr(settings, "watching", None)
    if watching is None or resource is None:  # Kopf's own observers of namespaces and CRDs, its tests' stand-ins
        return Selection("", "", "")

    def collected(name: str) -> list[str]:
        selectors = getattr(watching, name, None)
        return list(selectors.collect(resource)) if selectors is not None else []
    shard, *_ = collected("shard_selectors") or [""]
    return Selection(",".join(sorted(set(collected("label_selectors")))),
                     ",".join(sorted(set(collected("field_selectors")))), shard)


def watched(settings: Any, resource: Any, own_indices: Collection[str]) -> None:
    """Kopf's watcher of a resource starts: remember its selection for our indices it fills."""
    found = server_selection(settings, resource)
    if any(found):
        selected.update((index_id, found) for index_id in own_indices)


async def still_selected(settings: Any, resource: Any, selection: Selection, body: Any) -> bool:
    """Whether the API server still sends this object to the operator's watch: a watch that
    restarted from a new listing ("410 Gone") is not told of an object that left its selection
    meanwhile (relabelled to another shard), and a recheck must not act on its last state. Asked
    of the API server with the watch's own selection; where it cannot answer, True (as before)."""
    metadata = body.get("metadata") or {}
    params = {"fieldSelector": ",".join(filter(None, [f"metadata.name={metadata.get('name', '')}", selection.fields]))}
    params.update((key, value) for key, value in (("labelSelector", selection.labels),
                                                  ("shardSelector", selection.shard)) if value)
    try:
        found = await kopf_api.get(url=resource.get_url(namespace=metadata.get("namespace"), params=params),
                                   settings=settings, logger=_LOGGER)
    except Exception as e:  # noqa: BLE001  # unknown: the recheck runs, as it did before this question
        _LOGGER.debug(f"Could not ask whether {metadata.get('name')!r} is still selected: {e!r}")
        return True
    return bool(found.get("items"))


class Unlisted(NamedTuple):
    """An object a complete listing no longer holds, as it was last seen."""
    uid: str
    namespace: str | None
    name: str | None


class Listings:
    """One watcher's stream of a resource: for each object, the listing (the connection of Kopf's
    ``continuous_watch`` that began with it) it was last seen in or after, and which listing was the
    last to complete. An object is still in the watch while it was seen in or after that listing.
    One that a complete listing does not hold left unseen (no DELETED while the watch was down): it
    is forgotten then, and ``left`` is told it (uid, namespace, name). A listing cut midway completes nothing:
    what it held is read against the listing before it, and then against the next complete one."""

    def __init__(self, left: Callable[[list[Unlisted]], None] | None = None) -> None:
        self.listings = 0  # the listings begun: one per connection
        self.listed = 0  # the last one that completed
        self.seen: dict[str, tuple[int, str | None, str | None]] = {}  # uid: the listing, namespace, name
        self.vouches = True
        self.left = left

    async def stamped(self, stream: AsyncIterator[Any], *, initial_streaming: bool = False) -> AsyncIterator[Any]:
        """One connection of Kopf's watch (its listing, then its watch), passed on as it is, each
        object's event noted on the way. With Kopf's ``initial_streaming``, a cut initial stream
        that Kopf resumes still ends in LISTED, though it did not resend every object: such a stream
        cannot vouch for what left (unknown, not none)."""
        if initial_streaming:
            self.vouches = False
        self.listings += 1
        listing = self.listings
        async for raw_event in stream:
            if raw_event is watching.Bookmark.LISTED:
                self.listed = listing
                if self.vouches:
                    self._forget_unlisted()
            elif isinstance(raw_event, dict) and isinstance(raw_event.get("object"), dict):
                uid = (raw_event["object"].get("metadata") or {}).get("uid")
                if uid is None:
                    pass  # a BOOKMARK event: no object
                elif raw_event.get("type") == "DELETED":
                    self.seen.pop(uid, None)
                else:
                    metadata = raw_event["object"]["metadata"]
                    self.seen[uid] = (listing, metadata.get("namespace"), metadata.get("name"))
            yield raw_event

    def _forget_unlisted(self) -> None:
        """The objects the listing just completed does not hold: they left while the watch was down."""
        left = [Unlisted(uid, *where) for uid, (listing, *where) in self.seen.items() if listing < self.listed]
        for unlisted in left:
            del self.seen[unlisted.uid]
        if left and self.left is not None:
            self.left(left)

    def holds(self, body: Any) -> bool | None:
        """Whether the object was seen in or after the last complete listing (else it left unseen);
        None where the stream cannot tell (the API server is then asked)."""
        if not self.vouches:
            return None
        uid = (body.get("metadata") or {}).get("uid")
        return str(uid) in self.seen and self.seen[str(uid)][0] >= self.listed
