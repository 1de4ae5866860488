"""
The Kopf boundary: the only code that knows Kopf's internals (an import-linter contract keeps
it so). Everything above it speaks in our outcomes and runs; everything below knows no Kopf.

- :mod:`.internals` — the one module importing ``kopf._core``, Kopf's types, the version check;
- :mod:`.wrappers` — the wrapped Kopf functions, thin;
- :mod:`.cycle` — the per-cycle context: the handlers' kind, memory, waking, digests, ``recall()``;
- :mod:`.translation` — our outcomes into Kopf's ``Outcome`` by the kind's row of the table, logged
  at their levels; the finalizer guard;
- :mod:`.children` — sub-handlers that wait for us park their parent;
- :mod:`.delays` — which of Kopf's delays are ours, told to the cycle's own ``apply()``;
- :mod:`.requeue` — rechecks without writes;
- :mod:`.dependents` — a change handler's other objects, taken once per cycle; unknown is not none;
- :mod:`.listing` — whether Kopf has listed an indexed resource (an index is complete only then);
- :mod:`.held` — no release of an object whose deletion handler waits, or that is another shard's;
- :mod:`.marks` — our marks on Kopf's progress;
- :mod:`.kopf_runs` — the read-only :class:`~kopf_outcomes.HandlerRun` built from Kopf's objects;
- :mod:`.event_series` — outcome Events as series (a count that grows), with Kopf's API client.
"""
from kopf_outcomes._kopf.cycle import current_memory
from kopf_outcomes._kopf.event_series import post as post_event
from kopf_outcomes._kopf.internals import SUPPORTED, check_version
from kopf_outcomes._kopf.wrappers import Wrappers

__all__ = ["SUPPORTED", "Wrappers", "check_version", "current_memory", "post_event"]
