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

from kopf_outcomes_testing.cluster.errors import ClusterError

JSON = "application/json"
APPLY_PATCH = "application/apply-patch+yaml"  # server-side apply; a JSON body is valid YAML
FIELD_MANAGER = "kopf-outcomes"


class RestClient:
    """Requests to one API server with a bearer token or a client certificate.

    The server is verified against ``ca_path`` (the cluster's own CA), or the system's CAs.
    """

    def __init__(self, server: str, ca_path: Path | None, token: str | None, *,
                 client_cert: Path | None = None, client_key: Path | None = None,
                 timeout: float = 10.0) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._ssl = ssl.create_default_context(cafile=None if ca_path is None else str(ca_path))
        if client_cert is not None:
            self._ssl.load_cert_chain(str(client_cert), None if client_key is None else str(client_key))

    def request(self, method: str, path: str, body: Any = None, *,
                content_type: str = JSON) -> tuple[int, Any]:
        """Return the HTTP status and the decoded JSON (or text) body; never raise on 4xx/5xx."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": JSON, "Content-Type": content_type}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
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
