"""
``kopf-outcomes why`` and ``kopf-outcomes stuck`` (and ``signal``), also as the kubectl plugin
``kubectl outcomes``.

``why`` and ``stuck`` only read (GET), with the user's kubeconfig and current context, as kubectl
does; ``signal`` (:mod:`~kopf_outcomes.diagnosis.signal`) writes what the callback writes.
"""
from __future__ import annotations

import datetime
from typing import Any

import click

from kopf_outcomes.diagnosis import progress, render
from kopf_outcomes.diagnosis.kube import Client, Kind, KubeError
from kopf_outcomes.diagnosis.report import KOPF_FINALIZER, report
from kopf_outcomes.diagnosis.scan import scan
from kopf_outcomes.diagnosis.serving import serving
from kopf_outcomes.diagnosis.signal import signal
from kopf_outcomes.diagnosis.waits import waits

_storage_options = [
    click.option("--storage", type=click.Choice(["both", "annotations", "status"]), default="both",
                 show_default=True, help="Where the operator keeps Kopf's progress (settings.persistence)."),
    click.option("--prefix", default=progress.DEFAULT_PREFIX, show_default=True,
                 help="The annotations prefix of Kopf's progress storage."),
    click.option("--status-field", default=progress.DEFAULT_STATUS_FIELD, show_default=True,
                 help="The status field of Kopf's progress storage."),
    click.option("--finalizer", default=KOPF_FINALIZER, show_default=True, help="The operator's finalizer."),
    click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table",
                 show_default=True),
]


def storage_options(fn: Any) -> Any:
    for option in reversed(_storage_options):
        fn = option(fn)
    return fn


def _fail(error: Exception | str) -> None:
    raise click.ClickException(str(error))


@click.command()
@click.argument("target")
@click.option("-n", "--namespace", help="The object's namespace (default: the current context's).")
@storage_options
def why(target: str, namespace: str | None, output: str, **options: Any) -> None:
    """Why does KIND/NAME wait? Whether an operator serves it (Kopf's peering), Kopf's progress,
    the handlers' memory, the finalizers held."""
    kind_text, slash, name = target.partition("/")
    if not slash or not kind_text or not name:
        raise click.BadParameter(f"{target!r}: expected KIND/NAME, e.g. kopfexamples/my-object", param_hint="TARGET")
    kind: Kind | None = None
    try:
        client = Client.from_kubeconfig()
        discovery = client.discover()
        kind = client.resolve(kind_text, discovery)
        where = namespace or client.default_namespace
        body = client.get(kind.path(where, name))
        served = serving(client, body, datetime.datetime.now(datetime.timezone.utc))
        found = report(kind, body, served=served, **options)
        for handler in found["handlers"]:
            seen = (handler.get("memory") or {}).get("seen")
            if isinstance(seen, list) and seen:
                handler["waitsOn"] = waits(client, seen, discovery)
    except KubeError as e:
        if e.status == 404 and kind is not None:
            _fail(render.not_found(kind, name, where if kind.namespaced else None))
        _fail(e)
        return
    click.echo(render.why(found) if output == "table" else render.data(found, output))


@click.command()
@click.argument("kind", required=False)
@click.option("-n", "--namespace", help="Only this namespace (default: the current context's); "
                                        "cluster-scoped kinds are read cluster-wide, as kubectl does.")
@click.option("-A", "--all-namespaces", is_flag=True, help="All namespaces.")
@storage_options
def stuck(kind: str | None, namespace: str | None, all_namespaces: bool, output: str, **options: Any) -> None:
    """Every object being deleted with finalizers held, oldest first, and why (all kinds if KIND is not given).

    Kinds it could not read (RBAC, a time-out, an API group whose discovery fails) are named with
    the reason, and the exit status is then 1: objects of those kinds may be stuck too."""
    if namespace and all_namespaces:
        raise click.UsageError("-n/--namespace and -A/--all-namespaces exclude each other")
    try:
        client = Client.from_kubeconfig()
        discovery = client.discover()
        kinds = [client.resolve(kind, discovery)] if kind else discovery.kinds
        where = None if all_namespaces else namespace or client.default_namespace
        found = scan(client, kinds, where, lambda k, body: report(k, body, **options),
                     None if kind else discovery)
    except KubeError as e:
        _fail(e)
        return
    if output == "table":
        click.echo(render.stuck(found.reports, where=render.where(found.namespace, kinds), unread=found.unread,
                                read=found.read, narrowed=found.namespace is not None and any(
                                    k.namespaced for k in kinds)))
    else:
        click.echo(render.data(found.reports, output))
        if found.unread:
            click.echo(render.unread_note(found.unread), err=True)
    if not found.complete:
        raise SystemExit(1)


@click.group()
def kubectl_outcomes() -> None:
    """kubectl outcomes: why Kopf handlers wait, and their callbacks (a kubectl plugin of kopf-outcomes)."""


kubectl_outcomes.add_command(why)
kubectl_outcomes.add_command(stuck)
kubectl_outcomes.add_command(signal)

__all__ = ["why", "stuck", "signal", "kubectl_outcomes"]
