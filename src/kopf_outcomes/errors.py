"""The errors a user of kopf-outcomes may catch, in one place."""
from __future__ import annotations


class KopfOutcomesError(Exception):
    """The base of every error kopf-outcomes raises on purpose."""


class NotInstalledError(KopfOutcomesError, RuntimeError):
    """Something needs ``kopf_outcomes.install()`` first."""


class UnsupportedKopfError(KopfOutcomesError, RuntimeError):
    """The installed Kopf is outside the range the patch was tested with."""


class PluginError(KopfOutcomesError):
    """A plugin cannot be used: it failed to load, names an unknown hook, or is ``async``."""


class OutcomeMisreadError(KopfOutcomesError):
    """An outcome reached stock Kopf: ``kopf_outcomes.install()`` was not called."""


class ObjectsUnknownError(KopfOutcomesError, RuntimeError):
    """A handler read ``recall().objects`` where its other objects cannot be known: never "none"."""
