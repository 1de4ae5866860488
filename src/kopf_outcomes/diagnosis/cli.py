"""
``kopf-outcomes why`` and ``kopf-outcomes stuck``, also as the kubectl plugin ``kubectl outcomes``.

They only read (GET), with the user's kubeconfig and current context, as kubectl does.
"""
from __future__ import annotations

from typing import Any

import click

from kopf_outcomes.diagnosis import progress, render
from kopf_outcomes.diagnosis.kube import Client, Kind, KubeError
from kopf_outcomes.diagnosis.report import KOPF_FINALIZER, report

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


def _fail(error: Exception) -> None:
    raise click.ClickException(str(error))


@click.command()
@click.argument("target")
@click.option("-n", "--namespace", help="The object's namespace (default: the current context's).")
@storage_options
def why(target: str, namespace: str | None, output: str, **options: Any) -> None:
    """Why does KIND/NAME wait? Kopf's progress, the handlers' memory, the finalizers held."""
    kind_text, slash, name = target.partition("/")
    if not slash or not kind_text or not name:
        raise click.BadParameter(f"{target!r}: expected KIND/NAME, e.g. kopfexamples/my-object", param_hint="TARGET")
    try:
        client = Client.from_kubeconfig()
        kind = client.resolve(kind_text)
        body = client.get(kind.path(namespace or client.default_namespace, name))
    except KubeError as e:
        _fail(e)
        return
    found = report(kind, body, **options)
    click.echo(render.why(found) if output == "table" else render.data(found, output))


@click.command()
@click.argument("kind", required=False)
@click.option("-n", "--namespace", help="Only this namespace (default: the current context's).")
@click.option("-A", "--all-namespaces", is_flag=True, help="All namespaces.")
@storage_options
def stuck(kind: str | None, namespace: str | None, all_namespaces: bool, output: str, **options: Any) -> None:
    """Every object being deleted with finalizers held, oldest first, and why (all kinds if KIND is not given)."""
    if namespace and all_namespaces:
        raise click.UsageError("-n/--namespace and -A/--all-namespaces exclude each other")
    try:
        client = Client.from_kubeconfig()
        kinds = [client.resolve(kind)] if kind else list(client.kinds())
        where = None if all_namespaces else namespace or client.default_namespace
        found = [report(k, body, **options) for k in kinds
                 for body in _deleting(client, k, where, strict=kind is not None)]
    except KubeError as e:
        _fail(e)
        return
    found.sort(key=lambda r: (r["deletionTimestamp"], r["namespace"] or "", r["name"]))
    click.echo(render.stuck(found) if output == "table" else render.data(found, output))


def _deleting(client: Client, kind: Kind, namespace: str | None, *, strict: bool) -> list[dict[str, Any]]:
    if namespace is not None and not kind.namespaced:
        return []  # as kubectl: -n lists namespaced kinds; cluster-wide ones need -A
    try:
        listing = client.get(kind.path(namespace))
    except KubeError:
        if strict:
            raise
        return []  # a kind the user may not list, while scanning all kinds: skipped
    return [dict(item, apiVersion=listing.get("apiVersion"), kind=kind.kind) for item in listing.get("items", [])
            if (item.get("metadata") or {}).get("deletionTimestamp") and (item.get("metadata") or {}).get("finalizers")]


@click.group()
def kubectl_outcomes() -> None:
    """kubectl outcomes: why Kopf handlers wait (a kubectl plugin of kopf-outcomes)."""


kubectl_outcomes.add_command(why)
kubectl_outcomes.add_command(stuck)

__all__ = ["why", "stuck", "kubectl_outcomes"]
