"""
Per-handler options, declared in Python next to Kopf's own decorator.

    @kopf_outcomes.handler_options(explicit_completion=True, depends_on=["status.deletion"])
    @kopf.on.delete("kopfexamples")
    def delete_fn(**_): ...

The options ride on the function object, so the order of the two decorators does not matter.
:class:`HandlerOptions` is the one list of option fields: policies take theirs from it.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from kopf_outcomes import paths, values
from kopf_outcomes.values import FatalOnDelete, checked

_ATTRIBUTE = "__kopf_outcomes_options__"

FnT = TypeVar("FnT", bound=Callable[..., object])
PATH_OPTIONS = ("depends_on", "ignore")  # the options that are field paths
FLAG_OPTIONS = ("explicit_completion", "remember")  # the options that are on or off


@dataclasses.dataclass(frozen=True)
class HandlerOptions:
    """
    How our engine treats one handler. ``None`` means "not set here": the next source
    (policy, then the defaults) decides.

    - ``explicit_completion`` (``True``/``False``; so is ``remember``): a handler's ``True`` →
      Success, ``False`` → Pending, anything else is an error;
      in change handlers and sub-handlers (other kinds' values are read as stock Kopf reads them).
    - ``depends_on``: field paths ("spec.size", "status.deletion") whose change wakes the handler;
      default: spec, labels, annotations and status minus what the operator writes itself.
    - ``ignore``: field paths that are never part of its state (``["status.phase"]``: what the
      handler writes itself through its own client, which would otherwise wake it).
    - ``remember``: keep the memory for every outcome, not only Pending: a Retry then wakes
      on a relevant change, and a finished handler re-runs when the state moved on.
    - ``fatal_on_delete``: on deletion, a Fatal outcome ``"release"``-s the finalizer (stock)
      or ``"retain"``-s it until a person releases the object.

    Field paths are dotted, with a dot in a key escaped (``r"metadata.labels.app\\.kubernetes\\.io/name"``),
    or lists of segments (``["metadata", "labels", "app.kubernetes.io/name"]``).
    """

    explicit_completion: bool | None = None
    depends_on: tuple[str, ...] | None = None
    remember: bool | None = None
    fatal_on_delete: FatalOnDelete | None = None
    ignore: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        checked("fatal_on_delete", values.fatal_on_delete, self.fatal_on_delete)
        for name in FLAG_OPTIONS:
            checked(name, values.flag, getattr(self, name))
        for name in PATH_OPTIONS:  # checked, in their canonical form, whoever made the options
            found = getattr(self, name)
            if found is not None:
                object.__setattr__(self, name, paths.canonical_all(found, name))

    def merged(self, fallback: HandlerOptions) -> HandlerOptions:
        """These options, with the unset ones taken from ``fallback``."""
        return HandlerOptions(**{
            name: getattr(self, name) if getattr(self, name) is not None else getattr(fallback, name)
            for name in OPTION_NAMES
        })


OPTION_NAMES: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(HandlerOptions))
NO_OPTIONS = HandlerOptions()


@dataclasses.dataclass(frozen=True)
class UnreadOptions(HandlerOptions):
    """
    Options some plugin failed to give (it raised, or answered wrongly): the others' stand, and
    the mark says what is missing, so that nothing that a release depends on is read as a default
    (:mod:`kopf_outcomes.finalizer`). Not an option: :data:`OPTION_NAMES` does not list it.
    """

    failures: tuple[str, ...] = ()

    def merged(self, fallback: HandlerOptions) -> HandlerOptions:
        return unread(super().merged(fallback), self.failures)


def unread(options: HandlerOptions, failures: Iterable[str]) -> UnreadOptions:
    """``options``, marked as missing what the ``failures`` (one line each) would have given."""
    return UnreadOptions(**{name: getattr(options, name) for name in OPTION_NAMES}, failures=tuple(failures))
# The options that some handler_options() set: one no handler sets is unset for all of them,
# which every handler run can then know without looking at its function.
declared: set[str] = set()


def handler_options(
    *,
    explicit_completion: bool | None = None,
    depends_on: Iterable[str | Sequence[str]] | None = None,
    remember: bool | None = None,
    fatal_on_delete: FatalOnDelete | None = None,
    ignore: Iterable[str | Sequence[str]] | None = None,
) -> Callable[[FnT], FnT]:
    """Attach options to a handler function; stack it with Kopf's decorator in any order."""
    options = HandlerOptions(
        explicit_completion=explicit_completion,
        depends_on=depends_on,  # type: ignore[arg-type]  # checked and made a tuple of paths there
        remember=remember,
        fatal_on_delete=fatal_on_delete,
        ignore=ignore,  # type: ignore[arg-type]
    )

    declared.update(name for name in OPTION_NAMES if getattr(options, name) is not None)

    def decorator(fn: FnT) -> FnT:
        setattr(fn, _ATTRIBUTE, options)
        return fn

    return decorator


def attached_options(fn: object) -> HandlerOptions | None:
    """The options attached to a handler function, if any."""
    options = getattr(fn, _ATTRIBUTE, None)
    return options if options.__class__ is HandlerOptions else None
