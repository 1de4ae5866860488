"""
Prometheus metrics of kopf-outcomes: handler outcomes, handlers waiting now, wait times,
plugin failures. Installed, it is found through the ``kopf_outcomes`` entry point.

By default the metrics go into prometheus-client's default registry (which an operator may
already expose); ``KOPF_OUTCOMES_PROMETHEUS_ADDRESS=HOST:PORT`` also serves ``/metrics``.
In Python, before the operator starts::

    kopf_outcomes_prometheus.configure(registry=my_registry)   # or serve("127.0.0.1:9464")
"""
from __future__ import annotations

import threading

from prometheus_client import REGISTRY, CollectorRegistry

from kopf_outcomes import hookspecs
from kopf_outcomes_prometheus.observer import Observer
from kopf_outcomes_prometheus.serving import ADDRESS_ENV, AddressError, parse_address
from kopf_outcomes_prometheus.serving import serve as _serve

__all__ = ["ADDRESS_ENV", "AddressError", "Observer", "configure", "observer", "serve"]

# The core hooks this plugin can use, where the installed kopf-outcomes provides them.
OBJECTS_REPORTED = hasattr(hookspecs, "kopf_outcomes_observe_object")
FAILURES_REPORTED = hasattr(hookspecs, "kopf_outcomes_plugin_failed")
GONE_REPORTED = hasattr(hookspecs, "kopf_outcomes_object_gone")

_lock = threading.Lock()
_observer: Observer | None = None
_served: tuple[str, int] | None = None


def configure(*, registry: CollectorRegistry | None = None) -> Observer:
    """Choose the registry, before the first handler run; a second call with another is an error."""
    global _observer
    with _lock:
        wanted = registry if registry is not None else REGISTRY
        if _observer is None:
            _observer = Observer(wanted, objects_reported=OBJECTS_REPORTED, failures_reported=FAILURES_REPORTED)
        elif _observer.metrics.registry is not wanted:
            raise RuntimeError("kopf_outcomes_prometheus.configure() must be called before the first handler "
                               "run; the metrics are already registered in another registry")
        return _observer


def observer() -> Observer:
    """The process's observer, made in the default registry on first use."""
    return _observer if _observer is not None else configure()


def serve(address: str | None = None, *, source: str = "serve()") -> tuple[str, int]:
    """Serve ``/metrics`` of the configured registry on ``address``; once per process."""
    global _served
    with _lock:
        if _served is None:
            host, port = parse_address(address, source=source) if address is not None else ("0.0.0.0", 9464)
            registry = _observer.metrics.registry if _observer is not None else REGISTRY
            _served = _serve(registry, host, port, source=source)
        return _served
