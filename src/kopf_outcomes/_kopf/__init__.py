"""
The Kopf boundary: the only code that knows Kopf's internals (an import-linter contract keeps
it so). Everything above it speaks in our outcomes and runs; everything below knows no Kopf.

- :mod:`.internals` — the one module importing ``kopf._core``, Kopf's types, the version check;
- :mod:`.wrappers` — the four wrapped Kopf functions, thin;
- :mod:`.cycle` — the per-cycle context: memory, parking, waking, digests, ``recall()``;
- :mod:`.translation` — our outcomes into Kopf's ``Outcome``, logged at their levels;
- :mod:`.runs` — the read-only :class:`~kopf_outcomes.HandlerRun` built from Kopf's objects.
"""
from kopf_outcomes._kopf.cycle import current_memory
from kopf_outcomes._kopf.internals import SUPPORTED, check_version
from kopf_outcomes._kopf.wrappers import Patch

__all__ = ["SUPPORTED", "Patch", "check_version", "current_memory"]
