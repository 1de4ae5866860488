"""Serving ``/metrics`` over HTTP, on the address an operator is configured with."""
from __future__ import annotations

import ipaddress

from prometheus_client import CollectorRegistry, start_http_server

ADDRESS_ENV = "KOPF_OUTCOMES_PROMETHEUS_ADDRESS"


class AddressError(ValueError):
    """The configured address cannot be served; the message names where it came from."""


def parse_address(value: str, *, source: str = ADDRESS_ENV) -> tuple[str, int]:
    """``PORT``, ``HOST:PORT`` or ``[IPv6]:PORT``; a bare port listens on all interfaces."""
    text = value.strip()
    host, _, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    host = host or "0.0.0.0"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise AddressError(f"{source}={value!r}: expected PORT, HOST:PORT or [IPv6]:PORT, with a port "
                           f"from 0 to 65535 (e.g. 127.0.0.1:9464)")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not host.replace("-", "").replace(".", "").isalnum():
            raise AddressError(f"{source}={value!r}: {host!r} is neither an IP address nor a host name") from None
    return host, int(port)


def serve(registry: CollectorRegistry, host: str, port: int, *, source: str = ADDRESS_ENV) -> tuple[str, int]:
    """Start prometheus-client's HTTP server in a daemon thread; return the address it listens on."""
    try:
        server, _ = start_http_server(port, addr=host, registry=registry)
    except OSError as e:
        raise AddressError(f"{source}: cannot serve /metrics on {host}:{port}: {e.strerror or e}") from e
    return host, int(server.server_port)
