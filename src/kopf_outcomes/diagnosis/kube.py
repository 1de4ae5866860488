"""
Reading objects as ``kubectl`` does: the user's kubeconfig and current context, no new dependency.

The credentials come from Kopf's public ``kopf.login_with_kubeconfig()`` (tokens, client
certificates, basic auth); the requests are plain HTTPS from the standard library: GETs, and
``signal``'s merge-patch.
Kubeconfigs that need an exec plugin are not supported: pipe ``kubectl get -o json`` instead.

As client-go, an answer that asks to be retried (a 429 or 5xx with ``Retry-After``: the API server
answers "429 storage is (re)initializing" while a resource's watch cache starts) is sent again after
the time it asks for, at most ``RETRIES`` times; then it is the error it says.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import os
import ssl
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import kopf


class KubeError(Exception):
    """A request failed or the input names nothing; the message says which and why, and
    ``status`` the HTTP status of a request the server answered (None otherwise)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def reason(self) -> str:
        """The message without the request (where the thing read is named beside it)."""
        text = str(self)
        return text.split(": ", 1)[1] if text.startswith(("GET ", "PATCH ")) and ": " in text else text


PAGE = 500  # objects per list request, as kubectl's --chunk-size
RETRIES = 10  # as client-go's maxRetries for an answer with Retry-After
LONGEST_WAIT = 10.0  # seconds: a longer Retry-After is waited this long
# Lists of metadata only (the API server's PartialObjectMetadataList), JSON if it cannot.
MERGE_PATCH = "application/merge-patch+json"
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


@dataclasses.dataclass(frozen=True)
class Kind:
    """A resource kind as discovery describes it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    aliases: tuple[str, ...] = dataclasses.field(default=(), compare=False, repr=False)  # short, singular

    @property
    def api(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def qualified(self) -> str:
        """``kopfexamples.kopf.dev``: what ``kubectl`` accepts and prints."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None, name: str | None = None) -> str:
        where = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        return f"{self.api}{where}/{self.plural}" + (f"/{name}" if name else "")


@dataclasses.dataclass
class Discovery:
    """The kinds discovered, and the API groups whose discovery failed (with the reason)."""

    kinds: list[Kind] = dataclasses.field(default_factory=list)
    failures: list[tuple[str, str]] = dataclasses.field(default_factory=list)


class Client:
    """GETs against the API server of the current context."""

    def __init__(self, info: kopf.ConnectionInfo) -> None:
        if not info.server:
            raise KubeError("the current context's cluster has no server")
        self.server = info.server.rstrip("/")
        self.default_namespace = info.default_namespace or "default"
        self._headers = {"Accept": "application/json", "User-Agent": "kopf-outcomes-cli"}
        if info.token:
            self._headers["Authorization"] = f"Bearer {info.token}"
        elif info.username and info.password:
            basic = base64.b64encode(f"{info.username}:{info.password}".encode()).decode()
            self._headers["Authorization"] = f"Basic {basic}"
        self._context = _ssl_context(info) if self.server.startswith("https:") else None

    @classmethod
    def from_kubeconfig(cls) -> Client:
        try:
            info = kopf.login_with_kubeconfig(settings=kopf.OperatorSettings())
        except (OSError, KeyError, ValueError, kopf.LoginError) as e:
            raise KubeError(f"cannot read the kubeconfig ({os.environ.get('KUBECONFIG') or '~/.kube/config'}): "
                            f"{type(e).__name__}: {e}") from e
        if info is None:
            raise KubeError("no kubeconfig: set KUBECONFIG or create ~/.kube/config")
        return cls(info)

    def get(self, path: str, accept: str | None = None, **query: str) -> dict[str, Any]:
        url = self.server + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        headers = self._headers if accept is None else {**self._headers, "Accept": accept}
        return self._send(urllib.request.Request(url, headers=headers), path)

    def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge-patch (``kubectl patch --type=merge``): the one write, of ``signal``."""
        headers = {**self._headers, "Content-Type": MERGE_PATCH}
        request = urllib.request.Request(self.server + path, data=json.dumps(patch).encode(), headers=headers,
                                         method="PATCH")
        return self._send(request, path)

    def _send(self, request: urllib.request.Request, path: str) -> dict[str, Any]:
        verb = request.get_method()
        for attempt in range(RETRIES + 1):
            try:
                with urllib.request.urlopen(request, context=self._context, timeout=30) as response:
                    data: dict[str, Any] = json.loads(response.read())
                    return data
            except urllib.error.HTTPError as e:
                wait = _retry_after(e)
                if wait is None or attempt == RETRIES:
                    detail = _status_message(e.read()) or e.reason
                    raise KubeError(f"{verb} {path}: {e.code} {detail}", e.code) from None
                time.sleep(wait)
            except (urllib.error.URLError, OSError) as e:
                raise KubeError(f"{verb} {self.server}{path}: {getattr(e, 'reason', e)}") from None
        raise AssertionError("unreachable: the last attempt returns or raises")

    def discover(self) -> Discovery:
        """Every listable top-level resource kind the server serves (preferred versions only).
        As kubectl, a group whose discovery fails (an aggregated API whose service is down
        answers 503) is named among the failures, and the rest is read; only a server whose
        discovery fails as a whole is an error."""
        found = Discovery()
        found.kinds.extend(self._kinds("", "v1"))
        for group in self.get("/apis").get("groups", []):
            preferred = group.get("preferredVersion") or (group.get("versions") or [{}])[0]
            if preferred.get("version"):
                try:
                    found.kinds.extend(self._kinds(group["name"], preferred["version"]))
                except KubeError as e:
                    found.failures.append((f"{group['name']}/{preferred['version']}", e.reason))
        return found

    def _kinds(self, group: str, version: str) -> list[Kind]:
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        return [Kind(group, version, resource["name"], resource.get("kind", ""), bool(resource.get("namespaced")),
                     tuple(name for name in (*(resource.get("shortNames") or []), resource.get("singularName"))
                           if name))
                for resource in self.get(path).get("resources", [])
                if "/" not in resource["name"] and "list" in resource.get("verbs", [])]

    def resolve(self, text: str, discovery: Discovery | None = None) -> Kind:
        """``kopfexamples``, ``kex``, ``KopfExample``, ``kopfexamples.kopf.dev``, ``kopfexamples.v1.kopf.dev``."""
        wanted = text.lower()
        first, _, rest = wanted.partition(".")
        discovery = discovery if discovery is not None else self.discover()
        for kind in discovery.kinds:
            names = {kind.plural, kind.kind.lower()}
            if not rest and (first in names or first in kind.aliases):
                return kind
            if rest and first in names and rest in (kind.group, f"{kind.version}.{kind.group}"):
                return kind
        served = self._served_version(first, rest)
        if served is not None:
            return served
        unseen = "".join(f"; not discovered: {group} ({why})" for group, why in discovery.failures)
        raise KubeError(f"the server has no resource kind {text!r} (try: kubectl api-resources){unseen}")

    def _served_version(self, name: str, rest: str) -> Kind | None:
        """``kopfexamples.v1beta1.kopf.dev``: any version the server serves, as kubectl accepts
        it, not only the preferred one that discovery lists (asked only for a name not found)."""
        version, dot, group = rest.partition(".")
        if not dot or not group:
            return None
        try:
            kinds = self._kinds(group, version)
        except KubeError as e:
            if e.status == 404:
                return None  # no such group or version: the name is not found
            raise
        return next((kind for kind in kinds if name in (kind.plural, kind.kind.lower())), None)

    def metadata(self, kind: Kind, namespace: str | None) -> Iterator[dict[str, Any]]:
        """The metadata of every object of a kind (never the objects: a Secret's data stays
        unread), a page at a time, as ``kubectl get`` pages its lists."""
        token = ""
        while True:
            query = {"limit": str(PAGE), **({"continue": token} if token else {})}
            page = self.get(kind.path(namespace), accept=METADATA_ONLY, **query)
            yield from ((item.get("metadata") or {}) for item in page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return


def _retry_after(error: urllib.error.HTTPError) -> float | None:
    """The seconds the server asks to wait before the same request again; None: it does not ask.
    client-go's rule (``checkWait``): a 429 or a 5xx with a ``Retry-After`` of whole seconds."""
    if error.code != 429 and error.code < 500:
        return None
    try:
        return min(max(float(int(error.headers.get("Retry-After") or "")), 0.0), LONGEST_WAIT)
    except ValueError:  # none, or not whole seconds
        return None


def _status_message(payload: bytes) -> str:
    try:
        return str(json.loads(payload).get("message", ""))
    except (ValueError, AttributeError):
        return ""


def _ssl_context(info: kopf.ConnectionInfo) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if info.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if info.ca_path:
        context.load_verify_locations(cafile=os.fspath(info.ca_path))
    elif info.ca_data:
        context.load_verify_locations(cadata=base64.b64decode(info.ca_data).decode())
    if info.certificate_path or info.certificate_data:
        with tempfile.TemporaryDirectory(prefix="kopf-outcomes-") as folder:
            # ssl loads client certificates from files only: inline data goes to a private temp file.
            certificate = _file(info.certificate_path, info.certificate_data, os.path.join(folder, "crt"))
            key = (_file(info.private_key_path, info.private_key_data, os.path.join(folder, "key"))
                   if info.private_key_path or info.private_key_data else None)
            context.load_cert_chain(certificate, key)
    return context


def _file(path: str | bytes | os.PathLike[str] | os.PathLike[bytes] | None, data: str | bytes | None,
          target: str) -> str:
    if path:
        return os.fsdecode(path)
    with open(os.open(target, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as handle:
        handle.write(base64.b64decode(data or b""))
    return target
