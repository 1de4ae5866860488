"""
``kopf-outcomes signal KIND/NAME``: the external system's callback, from the shell.

It sends what :func:`kopf_outcomes.client.signal` sends from Python (one rule,
:func:`kopf_outcomes.client.patches`): a merge-patch of the annotations to the object, and of the
status through its status subresource (the main resource where the kind has none). The handler
that waits for that change wakes at once. With the user's kubeconfig, as ``why`` reads; no extra
is needed (the requests are the standard library's).
"""
from __future__ import annotations

import json
from typing import Any

import click

from kopf_outcomes import client as callback
from kopf_outcomes import paths
from kopf_outcomes.diagnosis.kube import Client, Kind, KubeError

_HELP_VALUES = ("PATH=TEXT sets a string, PATH:=JSON any JSON value (true, 3, {...}), PATH- removes it; "
                "repeat for more")


@click.command()
@click.argument("target")
@click.option("-n", "--namespace", help="The object's namespace (default: the current context's).")
@click.option("--status", "status_values", multiple=True, metavar="PATH=VALUE",
              help=f"A status field, by its path under status (deletion.state=done). {_HELP_VALUES}.")
@click.option("--annotate", "annotation_values", multiple=True, metavar="KEY=VALUE",
              help="An annotation (example.com/callback=done); KEY- removes it; repeat for more.")
def signal(target: str, namespace: str | None, status_values: tuple[str, ...],
           annotation_values: tuple[str, ...]) -> None:
    """Fire the callback a handler waits for: change KIND/NAME's status or annotations, as
    kopf_outcomes.client.signal() does (the handler that depends on them runs again at once)."""
    kind_text, slash, name = target.partition("/")
    if not slash or not kind_text or not name:
        raise click.BadParameter(f"{target!r}: expected KIND/NAME, e.g. kopfexamples/my-object", param_hint="TARGET")
    status_assignments = [_assignment(text, "--status") for text in status_values]
    status = _nested(status_assignments, "--status")
    annotations = {key: None if value is None else str(value)
                   for key, value in (_assignment(text, "--annotate", dotted=False) for text in annotation_values)}
    try:
        main, subresource = callback.patches(annotations, status)
    except ValueError as e:
        raise click.UsageError(f"{e}: give --status PATH=VALUE or --annotate KEY=VALUE") from None
    try:
        kube = Client.from_kubeconfig()
        kind = kube.resolve(kind_text)
        where = namespace or kube.default_namespace
        if main is not None:
            kube.merge_patch(kind.path(where, name), main)
        if subresource is not None:
            _patch_status(kube, kind, where, name, subresource)
    except KubeError as e:
        raise click.ClickException(str(e)) from None
    changed = [f"status.{path}" for path, _ in status_assignments] + [f"annotation {key}" for key in annotations]
    click.echo(f"{kind.qualified}/{name} signalled: {', '.join(changed)}")


def _patch_status(kube: Client, kind: Kind, namespace: str, name: str, patch: dict[str, Any]) -> None:
    """Through the status subresource, as a controller outside the operator writes it; a kind
    without one (404 there, while the object exists) takes the status in the main resource."""
    try:
        kube.merge_patch(kind.path(namespace, name) + "/status", patch)
    except KubeError as e:
        if e.status != 404:
            raise
        kube.get(kind.path(namespace, name))  # not found: that error, as it is
        kube.merge_patch(kind.path(namespace, name), patch)


def _assignment(text: str, option: str, *, dotted: bool = True) -> tuple[str, object]:
    """``path=text``, ``path:=json`` (a status field's) or ``path-`` (None: a merge-patch
    removes it); an annotation (not ``dotted``) is always text."""
    if text.endswith("-") and "=" not in text:
        key, value = text[:-1], None
    elif dotted and ":=" in text and text.index(":=") < text.index("="):
        key, raw = text.split(":=", 1)
        try:
            value = json.loads(raw)
        except ValueError as e:
            raise click.BadParameter(f"{text!r}: the value after := is not JSON ({e})", param_hint=option) from None
    elif "=" in text:
        key, value = text.split("=", 1)
    else:
        raise click.BadParameter(f"{text!r}: expected KEY=VALUE, KEY:=JSON or KEY-", param_hint=option)
    if not key:
        raise click.BadParameter(f"{text!r}: no key before the value", param_hint=option)
    if dotted:
        try:
            paths.parse(key)
        except ValueError as e:
            raise click.BadParameter(f"{text!r}: {e}", param_hint=option) from None
    return key, value


def _nested(assignments: list[tuple[str, object]], option: str) -> dict[str, Any]:
    """``deletion.state=done`` as ``{"deletion": {"state": "done"}}``; one path inside another's
    value is refused (which would win is not obvious)."""
    found: dict[str, Any] = {}
    for path, value in assignments:
        segments = paths.parse(path)
        into = found
        for segment in segments[:-1]:
            child = into.setdefault(segment, {})
            if not isinstance(child, dict):
                raise click.BadParameter(f"{path!r} is inside another value set here", param_hint=option)
            into = child
        if segments[-1] in into:
            raise click.BadParameter(f"{path!r} is set twice, or holds another path set here", param_hint=option)
        into[segments[-1]] = value
    return found
