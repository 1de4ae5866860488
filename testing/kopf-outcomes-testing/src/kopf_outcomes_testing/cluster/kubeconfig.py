"""Kubeconfig files, one per user, written as JSON (which every YAML loader reads).

The CA is embedded (``certificate-authority-data``) so that a kubeconfig keeps working when
copied or read by clients that resolve relative paths differently.
"""
from __future__ import annotations

import base64
import json
import os
from pathlib import Path

CONTEXT = "kopf-outcomes"
RESTRICTED_KUBECONFIG_ENV = "KOPF_OUTCOMES_RESTRICTED_KUBECONFIG"  # beside KUBECONFIG (admin)


def write_kubeconfig(path: Path, *, server: str, ca_pem: bytes, user: str, token: str) -> None:
    """Write a single-context kubeconfig for ``user`` authenticating with a bearer ``token``."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {
            "server": server,
            "certificate-authority-data": base64.b64encode(ca_pem).decode(),
        }}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": user}}],
        "current-context": CONTEXT,
        "preferences": {},
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds a token
    with os.fdopen(fd, "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
