"""An existing cluster, from a kubeconfig's current context (``--kopf-outcomes-kubeconfig``).

Token and client-certificate users are supported, inline (``*-data``) or as files; exec and
auth-provider plugins are not (the synchronous REST client of the fixtures cannot run them).
Inline certificates are written to a private temporary folder, as ``ssl`` reads files only.
"""
from __future__ import annotations

import atexit
import base64
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from kopf_outcomes_testing.cluster.errors import ClusterError
from kopf_outcomes_testing.cluster.info import ClusterInfo


def from_kubeconfig(path: Path) -> ClusterInfo:
    """The access data of ``path``'s current context; a :class:`ClusterError` names what is wrong."""
    def bad(problem: str) -> ClusterError:
        return ClusterError(f"kubeconfig {path}: {problem}",
                            "pass a kubeconfig whose current context has a server and a token"
                            " or client certificate (--kopf-outcomes-kubeconfig)")

    try:
        config = yaml.safe_load(path.read_text())
    except OSError as e:
        raise bad(f"cannot be read: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise bad(f"is not valid YAML: {e}") from None
    if not isinstance(config, dict):
        raise bad("is not a mapping")
    name = config.get("current-context")
    if not name:
        raise bad("has no current-context")
    context = _named(config, "contexts", name, "context", bad)
    cluster = _named(config, "clusters", context.get("cluster"), "cluster", bad)
    user = _named(config, "users", context.get("user"), "user", bad)
    server = cluster.get("server")
    if not server:
        raise bad(f"cluster {context.get('cluster')!r} has no server")
    if "exec" in user or "auth-provider" in user:
        raise bad(f"user {context.get('user')!r} authenticates through a plugin (exec/auth-provider),"
                  " which the fixtures do not run")
    folder = Path(tempfile.mkdtemp(prefix="kopf-outcomes-kubeconfig-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    base = path.parent
    ca = _file_or_data(cluster, "certificate-authority", folder, base)
    cert = _file_or_data(user, "client-certificate", folder, base)
    key = _file_or_data(user, "client-key", folder, base)
    token = user.get("token")
    if token is None and user.get("tokenFile"):
        token = (base / user["tokenFile"]).read_text().strip()
    if token is None and cert is None:
        raise bad(f"user {context.get('user')!r} has neither a token nor a client certificate")
    return ClusterInfo(server=str(server), ca_path=ca, admin_token=token, restricted_token=None,
                       admin_kubeconfig=path.resolve(), restricted_kubeconfig=None,
                       state_dir=None, client_cert=cert, client_key=key)


def _named(config: dict[str, Any], section: str, name: Any, key: str, bad: Any) -> dict[str, Any]:
    for entry in config.get(section) or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            value = entry.get(key)
            if isinstance(value, dict):
                return value
    raise bad(f"no {section[:-1]} named {name!r} (from the current context)")


def _file_or_data(section: dict[str, Any], field: str, folder: Path, base: Path) -> Path | None:
    if section.get(f"{field}-data"):
        target = folder / field
        target.write_bytes(base64.b64decode(section[f"{field}-data"]))
        target.chmod(0o600)
        return target
    if section.get(field):
        return base / str(section[field])  # relative paths are relative to the kubeconfig
    return None
