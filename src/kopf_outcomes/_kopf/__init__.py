"""
The Kopf boundary: the only code that knows Kopf's internals (an import-linter contract keeps
it so). Everything above it speaks in our outcomes and runs; everything below knows no Kopf.
Its modules, one idea each, are listed in the architecture page (docs/explanation/architecture.md).
"""
from kopf_outcomes._kopf.event_series import post as post_event
from kopf_outcomes._kopf.internals import SUPPORTED, check_version
from kopf_outcomes._kopf.recall import current_memory
from kopf_outcomes._kopf.wrappers import Wrappers

__all__ = ["SUPPORTED", "Wrappers", "check_version", "current_memory", "post_event"]
