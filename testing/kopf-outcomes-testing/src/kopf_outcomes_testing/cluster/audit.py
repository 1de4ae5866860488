"""
Counting API writes at the API server, from its audit log: the evidence that a waiting
operator costs nothing. Clients are told apart by their user agent (Kopf's is ``kopf/<ver>``).
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Write:
    verb: str
    resource: str
    subresource: str
    namespace: str
    name: str
    user_agent: str
    uri: str


class AuditLog:
    """Read the writes logged after a mark: ``mark = log.mark(); ...; log.writes(since=mark)``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def writes(self, *, since: int = 0, user_agent: str | None = None, namespace: str | None = None,
               name: str | None = None, resource: str | None = None) -> list[Write]:
        found = []
        with self.path.open("rb") as log:
            log.seek(since)
            for line in log:
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line being written right now
                ref = event.get("objectRef") or {}
                write = Write(
                    verb=event.get("verb", ""),
                    resource=ref.get("resource", ""),
                    subresource=ref.get("subresource", ""),
                    namespace=ref.get("namespace", ""),
                    name=ref.get("name", ""),
                    user_agent=event.get("userAgent", ""),
                    uri=event.get("requestURI", ""),
                )
                if user_agent is not None and not write.user_agent.startswith(user_agent):
                    continue
                if namespace is not None and write.namespace != namespace:
                    continue
                if name is not None and write.name != name:
                    continue
                if resource is not None and write.resource != resource:
                    continue
                found.append(write)
        return found
