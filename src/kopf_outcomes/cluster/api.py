"""A minimal synchronous Kubernetes REST client for the control plane's own chores.

Start-up checks, the CRD and RBAC set-up and the test namespaces need only a handful of JSON
requests; doing them with the standard library keeps the CLI synchronous and dependency-free.
"""
from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from kopf_outcomes.cluster.errors import ClusterError

JSON = "application/json"
APPLY_PATCH = "application/apply-patch+yaml"  # server-side apply; a JSON body is valid YAML
FIELD_MANAGER = "kopf-outcomes"


class RestClient:
    """Bearer-token requests to one API server, verified against the cluster's own CA."""

    def __init__(self, server: str, ca_path: Path, token: str, *, timeout: float = 10.0) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._ssl = ssl.create_default_context(cafile=str(ca_path))

    def request(self, method: str, path: str, body: Any = None, *,
                content_type: str = JSON) -> tuple[int, Any]:
        """Return the HTTP status and the decoded JSON (or text) body; never raise on 4xx/5xx."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}",
            "Accept": JSON,
            "Content-Type": content_type,
        })
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._ssl) as resp:
                return resp.status, _decode(resp.read())
        except urllib.error.HTTPError as e:
            return e.code, _decode(e.read())

    def apply(self, path: str, obj: dict[str, Any]) -> Any:
        """Create or update ``obj`` at its item ``path`` (server-side apply); fail loudly."""
        status, body = self.request(
            "PATCH", f"{path}?fieldManager={FIELD_MANAGER}&force=true", obj,
            content_type=APPLY_PATCH)
        if status >= 300:
            raise ClusterError(f"applying {path} failed with HTTP {status}: {body}",
                               "the API server rejected our own set-up; check its log")
        return body


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")
