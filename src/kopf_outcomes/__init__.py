"""
kopf-outcomes: decide what a Kopf handler run *means*.

    import kopf, kopf_outcomes

    kopf_outcomes.install()

    @kopf.on.delete("kopfexamples")
    def delete_fn(**_):
        if not external_system_done():
            return kopf_outcomes.Pending("waiting for the callback")
"""
from kopf_outcomes.hookspecs import hookimpl
from kopf_outcomes.options import HandlerOptions, handler_options
from kopf_outcomes.outcomes import Fatal, Outcome, Pending, Retry, Success
from kopf_outcomes.patch import install, installed, uninstall
from kopf_outcomes.recollection import Recall, recall
from kopf_outcomes.runs import Decision, HandlerRun, ResourceRef

__all__ = [
    "Decision",
    "Fatal",
    "HandlerOptions",
    "HandlerRun",
    "Outcome",
    "Pending",
    "Recall",
    "ResourceRef",
    "Retry",
    "Success",
    "handler_options",
    "hookimpl",
    "install",
    "recall",
    "installed",
    "uninstall",
]
