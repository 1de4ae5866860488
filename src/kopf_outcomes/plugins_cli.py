"""
``kopf-outcomes plugins``: which plugins an operator would load, and in which order they are called.

It asks pluggy itself (``get_hookimpls``), so the order shown is the order of the calls.
"""
from __future__ import annotations

from importlib import metadata
from pathlib import Path

import click

from kopf_outcomes import hookspecs
from kopf_outcomes.errors import PluginError
from kopf_outcomes.manager import ENTRY_POINT_GROUP, PluginManager
from kopf_outcomes.policy.plugin import POLICY_PLUGIN_NAME


@click.command("plugins")
@click.option("--policy", "policy_file", type=click.Path(dir_okay=False, path_type=Path),
              envvar="KOPF_OUTCOMES_POLICY",
              help="Include this policy file, as install() does [env: KOPF_OUTCOMES_POLICY].")
def plugins(policy_file: Path | None) -> None:
    """List the discovered plugins, their hooks, and the order of the calls."""
    manager = PluginManager()
    broken: dict[str, PluginError] = {}
    manager.load_entry_points(broken=broken)  # honours KOPF_OUTCOMES_PLUGINS and ..._DISABLE_PLUGINS
    if policy_file is not None:
        from kopf_outcomes.policy.cli import load_or_exit
        from kopf_outcomes.policy.plugin import PolicyPlugin

        manager.register(PolicyPlugin(load_or_exit(policy_file)), name=POLICY_PLUGIN_NAME)

    entry_points = {entry_point.name: entry_point
                    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    registered = [name for name, _ in manager.list_name_plugin()]
    click.echo("Plugins, in the order of registration:")
    for name in registered:
        if name in entry_points:
            entry_point = entry_points[name]
            dist = entry_point.dist
            origin = f"entry point {entry_point.value}" + (
                f" ({dist.name} {dist.version})" if dist is not None else "")
        elif name == POLICY_PLUGIN_NAME:
            origin = f"policy {policy_file}"
        else:
            origin = "built-in"
        click.echo(f"  {name:<24} {origin}")
    for name in sorted(set(entry_points) - set(registered)):
        if name in broken:
            click.echo(f"  {name:<24} BROKEN, not loaded: {broken[name]}")
        else:
            click.echo(f"  {name:<24} not loaded: excluded by the allow/deny lists")

    click.echo("Hooks, each with its plugins in the order they are called:")
    for hook_name in _hook_names():
        caller = getattr(manager.hook, hook_name)
        firstresult = " (firstresult: the first answer decides)" if caller.spec.opts.get(
            "firstresult") else ""
        click.echo(f"  {hook_name}{firstresult}")
        if not caller.get_hookimpls():
            click.echo("    (none)")
        for impl in reversed(caller.get_hookimpls()):  # pluggy calls the list back to front
            marks = [mark for mark in ("tryfirst", "trylast", "wrapper", "hookwrapper")
                     if getattr(impl, mark)]
            click.echo(f"    {impl.plugin_name}" + (f" [{', '.join(marks)}]" if marks else ""))
    if broken:  # listed, and still a failure: an operator would not start with these installed
        raise click.ClickException(f"{len(broken)} plugin(s) cannot be used, an operator would not start: "
                                   f"{', '.join(sorted(broken))} (see above)")


def _hook_names() -> list[str]:
    """The hooks in the order the hookspecs module declares them (the order of a run)."""
    return [name for name in vars(hookspecs) if name.startswith(f"{hookspecs.PROJECT_NAME}_")]
