"""
A kopf-outcomes plugin: a handler's ``TimeoutError`` is a Retry in 10 seconds at WARNING,
instead of Kopf's ERROR after its handler backoff (60 s by default).

Registered in code with ``kopf_outcomes.install(plugins=[quiet_timeouts])``, or found through
the ``kopf_outcomes`` entry-point group once packaged (see docs/howto/write-plugin.md).
"""
from __future__ import annotations

from kopf_outcomes import HandlerRun, Outcome, Retry, hookimpl


@hookimpl
def kopf_outcomes_classify_exception(run: HandlerRun, exception: Exception) -> Outcome | None:
    if isinstance(exception, TimeoutError):
        return Retry(f"timed out: {exception}", delay=10, level="WARNING")
    return None  # not ours: the next plugin (finally the built-in, stock Kopf) decides
