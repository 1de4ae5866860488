"""``kopf-outcomes cluster up|down|status|env|build``: the control plane from the shell.

Registered in the main ``kopf-outcomes`` CLI through the ``kopf_outcomes.commands`` entry point.

Progress goes to stderr and results to stdout, so that ``up``'s last stdout line (the admin
kubeconfig path) and ``env``'s export lines can be consumed by scripts.
"""
from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from typing import TypeVar

import click

from kopf_outcomes_testing.cluster import binaries, control_plane
from kopf_outcomes_testing.cluster.errors import ClusterError
from kopf_outcomes_testing.cluster.kubeconfig import RESTRICTED_KUBECONFIG_ENV

T = TypeVar("T")


def _progress(message: str) -> None:
    click.echo(message, err=True)


def _or_exit(action: Callable[[], T]) -> T:
    """Run ``action``; show a :class:`ClusterError` as a message (no traceback) and exit 1."""
    try:
        return action()
    except ClusterError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)


@click.group()
def cluster() -> None:
    """A local Kubernetes control plane (kube-apiserver + etcd) for tests and demos.

    With ``up --controllers``, kube-controller-manager too: garbage collection and namespace deletion.
    """


@cluster.command()
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help="kube-apiserver port on 127.0.0.1 (when starting; default: a free one).")
@click.option("--etcd-port", type=click.IntRange(1, 65535), default=None,
              help="etcd client port on 127.0.0.1 (when starting; default: a free one).")
@click.option("--timeout", type=click.FloatRange(min=1), default=control_plane.DEFAULT_TIMEOUT,
              show_default=True, help="Seconds to wait for the servers to become ready.")
@click.option("--controllers", is_flag=True,
              help="Also run kube-controller-manager (garbage collection, namespace deletion),"
                   " next to a running cluster if needed.")
def up(port: int | None, etcd_port: int | None, timeout: float, controllers: bool) -> None:
    """Build if needed, start or find the cluster, wait until ready; print the kubeconfig path."""
    info = _or_exit(lambda: control_plane.ensure_running(
        apiserver_port=port, etcd_port=etcd_port, timeout=timeout, progress=_progress,
        controllers=controllers))
    click.echo(f"cluster is up at {info.server}; export lines: kopf-outcomes cluster env",
               err=True)
    click.echo(str(info.admin_kubeconfig))


@cluster.command()
@click.option("--controllers", is_flag=True,
              help="Also build kube-controller-manager (for `up --controllers`).")
@click.option("--prometheus", is_flag=True,
              help="Instead, build promtool and prometheus (the tests of the Prometheus plugin need them).")
def build(controllers: bool, prometheus: bool) -> None:
    """Build kube-apiserver and etcd once with Go (minutes), into the cache; print the folder.

    Not needed when ``KUBEBUILDER_ASSETS`` names envtest's binaries (``setup-envtest use -p path``).
    """
    if prometheus:
        click.echo(str(_or_exit(lambda: binaries.build_prometheus(_progress))))
        return
    found = _or_exit(lambda: binaries.build_binaries(_progress))
    if controllers:
        _or_exit(lambda: binaries.build_controller_manager(_progress))
    click.echo(str(found.kube_apiserver.parent))


@cluster.command()
def down() -> None:
    """Stop the processes the cluster started and remove its state."""
    if control_plane.stop():
        click.echo("cluster stopped", err=True)
    else:
        click.echo("no cluster was running", err=True)


@cluster.command()
def status() -> None:
    """Exit 0 if the cluster is up and ready, 1 otherwise."""
    info = control_plane.running()
    if info is None:
        click.echo("cluster is not running", err=True)
        sys.exit(1)
    with_controllers = " with kube-controller-manager" if control_plane.controllers_running() else ""
    click.echo(f"cluster is up at {info.server}{with_controllers}")


@cluster.command()
def env() -> None:
    """Print shell ``export`` lines for the admin and the restricted kubeconfigs."""
    info = control_plane.running()
    if info is None:
        click.echo("error: cluster is not running\nhint: run `kopf-outcomes cluster up`",
                   err=True)
        sys.exit(1)
    click.echo(f"export KUBECONFIG={shlex.quote(str(info.admin_kubeconfig))}")
    click.echo(f"export {RESTRICTED_KUBECONFIG_ENV}="
               f"{shlex.quote(str(info.restricted_kubeconfig))}")
