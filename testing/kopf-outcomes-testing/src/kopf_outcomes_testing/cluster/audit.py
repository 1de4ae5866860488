"""
Counting API writes at the API server, from its audit log: the evidence that a waiting
operator costs nothing. Clients are told apart by their user agent (Kopf's is ``kopf/<ver>``).
"""
from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple


@dataclasses.dataclass(frozen=True)
class Write:
    verb: str
    resource: str
    subresource: str
    namespace: str
    name: str
    user_agent: str
    uri: str
    audit_id: str = ""  # one request's entries share it (a watch: when it starts, and when it ends)
    user: str = ""
    code: int = 0  # the response's HTTP status; 0 where not logged (a watch that has not ended)


class Mark(NamedTuple):
    """A place in the audit log: the file and the offset in it. The file is known by its inode
    (the API server renames a full log to ``audit-<time>.log`` and starts a new one) and its
    first line (an inode is reused once a file is deleted; an audit line is unique)."""

    inode: int
    offset: int
    head: bytes = b""


def _is_marked(path: Path, mark: Mark) -> bool:
    """Whether this is the file of the mark (its first line may have been empty or partial then)."""
    with path.open("rb") as file:
        return os.fstat(file.fileno()).st_ino == mark.inode and file.readline(_HEAD).startswith(mark.head)


_HEAD = 512
BEGINNING = Mark(0, 0)  # before any log: everything logged


class AuditLogRotatedError(RuntimeError):
    """The part of the log since the mark is gone: the writes since then cannot be counted."""


class AuditLog:
    """Read the writes logged after a mark: ``mark = log.mark(); ...; log.writes(since=mark)``.

    The API server rotates its log when it is full (``--audit-log-maxsize``, 100 MB by
    default: a long benchmark fills it). The writes since a mark are read across a rotation,
    from the renamed file on; a mark whose file is gone raises, never reads as "no writes".
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> Mark:
        try:
            with self.path.open("rb") as file:
                head = file.readline(_HEAD)
                return Mark(os.fstat(file.fileno()).st_ino, os.fstat(file.fileno()).st_size, head)
        except FileNotFoundError:
            return Mark(0, 0)

    def _segments(self, since: Mark) -> list[tuple[Path, int]]:
        """The files to read, oldest first, each with the offset to start at."""
        rotated = sorted(self.path.parent.glob(f"{self.path.stem}-*{self.path.suffix}"))  # by time
        if since.inode == 0:  # there was no log at the mark: all of it is newer
            return [*((path, 0) for path in rotated), (self.path, 0)]
        if self.path.exists() and _is_marked(self.path, since):
            return [(self.path, since.offset)]
        start = next((i for i, path in enumerate(rotated) if _is_marked(path, since)), None)
        if start is None:
            raise AuditLogRotatedError(f"the audit log {self.path} was rotated since the mark and the "
                                       f"rotated part is gone; the writes since then cannot be counted")
        return [(rotated[start], since.offset), *((path, 0) for path in rotated[start + 1:]), (self.path, 0)]

    def _logged(self, since: Mark) -> Iterator[Write]:
        for path, offset in self._segments(since):
            with path.open("rb") as log:
                log.seek(offset)
                for line in log:
                    try:
                        event = json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a line being written right now
                    ref = event.get("objectRef") or {}
                    yield Write(verb=event.get("verb", ""), resource=ref.get("resource", ""),
                                subresource=ref.get("subresource", ""), namespace=ref.get("namespace", ""),
                                name=ref.get("name", ""), user_agent=event.get("userAgent", ""),
                                uri=event.get("requestURI", ""), audit_id=event.get("auditID", ""),
                                user=(event.get("user") or {}).get("username", ""),
                                code=int((event.get("responseStatus") or {}).get("code") or 0))

    def writes(self, *, since: Mark = BEGINNING, user_agent: str | None = None, namespace: str | None = None,
               name: str | None = None, resource: str | None = None) -> list[Write]:
        return [write for write in self._logged(since)
                if (user_agent is None or write.user_agent.startswith(user_agent))
                and (namespace is None or write.namespace == namespace)
                and (name is None or write.name == name)
                and (resource is None or write.resource == resource)]
