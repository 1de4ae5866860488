"""
The known violations on main that the histories would find, by issue and finding ("41-1": issue
41, finding 1). Each gates its trigger in the generator or its check in the oracle, so that CI
passes until its fix lands; empty the set once the fixes are merged (every trigger then runs).
The regression tests of the findings still open are expected to fail while their name is here.
"""
from __future__ import annotations

import os

KNOWN_OPEN: frozenset[str] = frozenset({
    "stale-view",  # an event older than one seen runs a handler on an old memory: acted_on_this_state is False
    #                for a state it acted on (P3; its stranding, stale-view-stranded, is fixed: see test_regressions)
    "stale-view-retained",  # a handler retained, then concluded for good on a stale view whose write is refused:
    #                         the object shows it retained (P2 waived for a handler the object shows retained)
})

# To see what a fix leaves open, name the findings still waived (comma-separated; empty: none):
# KOPF_OUTCOMES_HISTORIES_KNOWN="" pytest tests/histories
if "KOPF_OUTCOMES_HISTORIES_KNOWN" in os.environ:
    KNOWN_OPEN = frozenset(name for name in os.environ["KOPF_OUTCOMES_HISTORIES_KNOWN"].split(",") if name)
