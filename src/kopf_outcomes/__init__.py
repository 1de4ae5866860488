"""
kopf-outcomes: decide what a Kopf handler run *means*.

    import kopf, kopf_outcomes

    kopf_outcomes.install()

    @kopf.on.delete("kopfexamples")
    def delete_fn(**_):
        if not external_system_done():
            return kopf_outcomes.Pending("waiting for the callback")
"""
from kopf_outcomes import hooks as hooks  # the typed hook markers: kopf_outcomes.hooks.classify_result, ...
from kopf_outcomes._version import __version__
from kopf_outcomes.errors import (
    KopfOutcomesError,
    NotInstalledError,
    ObjectsUnknownError,
    OutcomeMisreadError,
    PluginError,
    UnsupportedKopfError,
)
from kopf_outcomes.hookspecs import hookimpl
from kopf_outcomes.installation import install, is_installed, plugin_manager, recall, uninstall
from kopf_outcomes.kinds import Kind
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.memory import Memory, MemoryRecord
from kopf_outcomes.objects import ObjectRef, Source, depends_on_objects, owned, referenced, selected
from kopf_outcomes.options import HandlerOptions, handler_options
from kopf_outcomes.outcomes import Fatal, Outcome, Pending, Retry, Success
from kopf_outcomes.runs import Decision, HandlerRun, ResourceRef
from kopf_outcomes.shards import shard
from kopf_outcomes.values import LevelName

__all__ = [
    "Decision",
    "Fatal",
    "HandlerOptions",
    "HandlerRun",
    "Kind",
    "KopfOutcomesError",
    "LevelName",
    "Memory",
    "MemoryRecord",
    "NotInstalledError",
    "ObjectRef",
    "ObjectsUnknownError",
    "Outcome",
    "OutcomeMisreadError",
    "Pending",
    "PluginError",
    "PluginManager",
    "ResourceRef",
    "Retry",
    "Source",
    "Success",
    "UnsupportedKopfError",
    "__version__",
    "depends_on_objects",
    "handler_options",
    "hookimpl",
    "install",
    "is_installed",
    "owned",
    "plugin_manager",
    "recall",
    "referenced",
    "selected",
    "shard",
    "uninstall",
]
