"""
``kopf-outcomes check-policy`` and ``kopf-outcomes explain``.

``explain`` runs the real engine on a made-up handler run, with the policy registered as the
operator would register it, so an explanation cannot drift from what happens at runtime.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import kopf

from kopf_outcomes import builtin, engine
from kopf_outcomes.events import event_type
from kopf_outcomes.finalizer import retains
from kopf_outcomes.kinds import STOCK, Kind
from kopf_outcomes.manager import PluginManager
from kopf_outcomes.outcomes import Fatal, Outcome, Pending, Retry, Success
from kopf_outcomes.policy.errors import PolicyError
from kopf_outcomes.policy.loading import load_policy
from kopf_outcomes.policy.model import Backoff, ExceptionRule, Policy, Scope
from kopf_outcomes.policy.plugin import PolicyPlugin, describe_threshold
from kopf_outcomes.policy.validation import IMPORT_FAILURE, resolve_exception
from kopf_outcomes.runs import HandlerRun, ResourceRef

# A missing file is a usage error (exit 2, "does not exist"), not an invalid policy.
_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command("check-policy")
@click.argument("file", type=_FILE)
@click.option("--no-import", "no_import", is_flag=True,
              help="Check exception names for their form only: import no module the policy names "
                   "(by default they are imported, which runs their top-level code).")
def check_policy(file: Path, no_import: bool) -> None:
    """Check a policy file (TOML, or a pyproject.toml): exit 0 if valid, else list every problem."""
    policy = load_or_exit(file, import_names=not no_import)
    rules = sum(len(scope.exceptions) for scope in _scopes(policy))
    click.echo(f"{file}: valid policy: {len(policy.handlers)} handler scope(s), "
               f"{len(policy.resources)} resource scope(s), {rules} exception rule(s)")
    click.echo(APPLIES_TO)


@click.command("explain")
@click.option("--policy", "policy_file", type=_FILE, required=True, help="The policy file.")
@click.option("--handler", "handler_id", required=True, help="The handler id, e.g. delete_fn.")
@click.option("--resource", help="The resource as plural.version.group, e.g. "
                                 "kopfexamples.v1.kopf.dev (pods.v1 for the core group).")
@click.option("--kind", help="The resource's kind, e.g. KopfExample, for rules keyed by kind.")
@click.option("--exception", "exception_name", help="The exception raised, by dotted name.")
@click.option("--message", help="The exception's message (none if not given).")
@click.option("--result", help="The value returned, as JSON (true, false, 42, \"text\") "
                               "or as plain text.")
@click.option("--deleting", is_flag=True,
              help="The run is for a deletion (where fatal_on_delete applies).")
@click.option("--retry", default=0, show_default=True, type=click.IntRange(min=0),
              help="Previous runs of the handler (Kopf's retry).")
@click.option("--runtime", default=0.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds since the handler first ran for this cause (Kopf's runtime).")
def explain(policy_file: Path, handler_id: str, resource: str | None, kind: str | None,
            exception_name: str | None, message: str | None, result: str | None,
            deleting: bool, retry: int, runtime: float) -> None:
    """Show which rule decides a handler run under a policy, and the outcome."""
    # Every usage error before any output: the exception's name and the resource first.
    if (exception_name is None) == (result is None):
        raise click.UsageError("give exactly one of --exception or --result")
    ref = _resource(resource, kind)
    exception = _exception(exception_name, message) if exception_name is not None else None
    plugin = PolicyPlugin(load_or_exit(policy_file))
    plugins = PluginManager()
    plugins.register(plugin, name=plugin.name)
    # A resource handler runs for an object: then a failing plugin shows as a Retry, as it would.
    body = {"metadata": {"name": "(explain)"}} if ref is not None else None
    run = HandlerRun(
        handler_id=handler_id, reason="delete" if deleting else None, resource=ref, body=body,
        retry=retry, runtime=runtime, deleting=deleting, options=plugins.options(handler_id, ref),
        logger=logging.getLogger(__name__),
    )
    settings = plugin.resolver.settings(handler_id, ref)
    click.echo(f"run:         handler {handler_id!r}, resource {ref or '(none)'}, "
               f"retry {retry}, runtime {runtime:g}s" + (", deleting" if deleting else ""))
    click.echo(APPLIES_TO)
    for name, where in settings.option_sources.items():
        click.echo(f"option:      {name} = {json.dumps(getattr(run.options, name))} ({where})")

    origin: object
    if exception is not None:
        origin = exception
        found = plugin.resolver.match(handler_id, ref, type(exception))
        click.echo(f"exception:   {exception_name}({'' if message is None else repr(message)})")
        click.echo(f"decided by:  {found.where if found else 'no policy rule: stock Kopf reading'}")
        rule = found.rule if found else ExceptionRule()
        if found:
            click.echo(f"rule:        {_fields(rule) or '(no fields: the stock outcome)'}")
        # The scopes' levels and delays apply to what a rule leaves unset, and to stock readings.
        timing = rule.delay if rule.backoff is None else rule.backoff
        for setting, own in ((settings.retry_level, rule.level), (settings.fatal_level, rule.level),
                             (settings.timing, timing)):
            if setting is not None:
                note = " (the rule's own value applies)" if own is not None else ""
                click.echo(f"setting:     {setting.where} = {_show(setting.value)}{note}")
        outcome = engine.decide(plugins, run, exception=exception)
        stock = builtin.stock_reading(run, exception=exception).outcome
    else:
        origin = _value(result or "")
        click.echo(f"result:      {origin!r}")
        how = ("explicit completion" if run.options.explicit_completion
               else "the built-in reading (explicit_completion is off)")
        click.echo(f"decided by:  {how}")
        outcome = engine.decide(plugins, run, result=origin)
        stock = builtin.stock_reading(run, result=origin).outcome

    steps = plugin.resolver.escalation(handler_id, ref, origin)
    for index, step in enumerate(steps.value if steps else ()):
        state = "reached" if step.reached(retry, runtime) else "not reached"
        what = ", ".join(filter(None, [
            f"level {logging.getLevelName(step.level)}" if step.level is not None else "",
            "fatal" if step.outcome == "fatal" else "",
        ]))
        click.echo(f"escalation:  {steps.where if steps else ''}[{index}] "
                   f"{describe_threshold(step)}: {what} ({state})")
    final = stock if outcome is None else outcome
    chosen = final.on_delete if isinstance(final, Fatal) else None
    on_delete = "retain" if run.deleting and retains("change", "delete", chosen, run.options) else "release"
    # A stock failure that the finalizer guard retains is not "unchanged".
    unchanged = outcome is None and not (isinstance(stock, Fatal) and on_delete == "retain")
    click.echo(f"outcome:     {_describe(final, run, on_delete)}" + (" — stock Kopf runs it unchanged"
                                                                    if unchanged else ""))


# Which kinds of handlers a policy's rules reach: the kinds table's STOCK kinds are stock Kopf's.
_DECORATORS = {Kind.LOGIN: "@kopf.on.login", Kind.EVENT: "@kopf.on.event", Kind.INDEX: "@kopf.index"}
APPLIES_TO = (f"applies to:  {', '.join(kind.value for kind in Kind if kind not in STOCK)} handlers; "
              f"not to {', '.join(kind.value for kind in STOCK)} handlers "
              f"({', '.join(_DECORATORS.get(kind, kind.value) for kind in STOCK)}: stock Kopf, no policy or plugin)")


IMPORT_HINT = ("hint: exception classes are imported with the current folder ({folder}) first on the path, as "
               "`kopf run myop.py` puts its file's folder: run this from the operator's folder, or add the "
               "folder of its modules to PYTHONPATH")


@contextlib.contextmanager
def operator_folder() -> Iterator[str]:
    """The current folder first on ``sys.path`` while the policy's names are imported: an
    exception class of the operator's own ``myop.py`` imports here as under ``kopf run myop.py``
    (which puts the file's folder there). Put back as it was afterwards."""
    folder = os.getcwd()
    sys.path.insert(0, folder)
    try:
        yield folder
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)


def load_or_exit(file: Path, *, import_names: bool = True) -> Policy:
    """The policy in a file; or its problems, one a line, on stderr, and exit status 1."""
    try:
        with operator_folder() as folder:
            return load_policy(file, import_names=import_names)
    except PolicyError as e:
        for message in e.messages:
            click.echo(message, err=True)
        count = f"{len(e.messages)} problem" + ("s" if len(e.messages) != 1 else "")
        click.echo(f"{file}: invalid policy, {count}; an operator refuses to start with it",
                   err=True)
        if import_names and any(IMPORT_FAILURE in message for message in e.messages):
            click.echo(IMPORT_HINT.format(folder=folder), err=True)
        raise SystemExit(1) from None


def _scopes(policy: Policy) -> list[Scope]:
    return [policy.defaults, *policy.handlers.values(), *policy.resources.values()]


def _resource(spec: str | None, kind: str | None) -> ResourceRef | None:
    if spec is None:
        if kind is not None:
            raise click.UsageError("--kind needs --resource")
        return None
    parts = spec.split(".", 2)
    if len(parts) < 2 or not all(parts):
        raise click.BadParameter("expected plural.version.group, or plural.version for the "
                                 "core group", param_hint="--resource")
    return ResourceRef(group=parts[2] if len(parts) == 3 else "", version=parts[1],
                       plural=parts[0], kind=kind)


def _exception(name: str, message: str | None) -> Exception:
    try:
        with operator_folder() as folder:
            cls = resolve_exception(name)
    except ValueError as e:
        hint = f"\n{IMPORT_HINT.format(folder=folder)}" if IMPORT_FAILURE in str(e) else ""
        raise click.BadParameter(f"{e}{hint}", param_hint="--exception") from None
    args = () if message is None else (message,)
    try:
        return cls(*args)
    except Exception:  # a class with other required arguments: build it without __init__
        exception = cls.__new__(cls)
        exception.args = args
        return exception


def _value(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _show(value: object) -> str:
    """A policy value as the TOML file spells it (numbers of the model's ints are levels)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f'"{logging.getLevelName(value)}"'
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, Backoff):
        return "{ " + _fields(value) + " }"
    return json.dumps(value)


def _fields(model: ExceptionRule | Backoff) -> str:
    """The fields set in a rule (escalation is shown on its own lines) or a backoff."""
    return ", ".join(f"{field.name} = {_show(getattr(model, field.name))}"
                     for field in dataclasses.fields(model)
                     if getattr(model, field.name) is not None and field.name != "escalate")


def _describe(outcome: Outcome, run: HandlerRun, on_delete: str) -> str:
    """The outcome, its log level, and the Kubernetes Event posted for it by Kopf's default settings."""
    if isinstance(outcome, Success):
        return f"success (result {outcome.result!r}); logged at INFO: {_event(logging.INFO)}"
    if isinstance(outcome, Pending):
        when = (f"recheck in {outcome.recheck:g}s" if outcome.recheck is not None
                else "parked until its state changes")
        return (f"pending: {outcome.reason!r}, {when}; logged at INFO when it begins "
                f"({_event(logging.INFO)}), DEBUG while unchanged")
    if isinstance(outcome, Retry):
        return (f"retry in {outcome.delay:g}s: {outcome.reason!r}; logged at "
                f"{logging.getLevelName(outcome.level)}: {_event(outcome.level)}")
    if isinstance(outcome, Fatal):
        finalizer = f" ({on_delete} the finalizer)" if run.deleting else ""
        return (f"fatal: {outcome.reason!r}{finalizer}; logged at "
                f"{logging.getLevelName(outcome.level)}: {_event(outcome.level)}")
    return repr(outcome)


def default_posting() -> Any:  # Kopf exports no name for its PostingSettings
    """Kopf's posting settings as an operator starts with them (the installed Kopf's defaults)."""
    return kopf.OperatorSettings().posting


def _event(level: int) -> str:
    """The Event that a line at this level posts with the installed Kopf's default posting settings:
    outcome lines are log lines, and Kopf posts log lines only where its settings say so
    (docs/outcomes.md, "Log levels and Kubernetes Events", says since which Kopf)."""
    posting = default_posting()
    kind = event_type(level)
    event = f"an {kind} Event" if kind == "Error" else f"a {kind} Event"
    if level < posting.level:
        return "no Event"
    if not getattr(posting, "loggers", True):  # a Kopf without the switch posts every log line
        return f"no Event by Kopf's default settings ({event} with settings.posting.loggers = True)"
    return event
