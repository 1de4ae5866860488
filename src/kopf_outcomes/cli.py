"""The ``kopf-outcomes`` console script: one click group, one sub-module per command family.

Command families of other distributions join through the ``kopf_outcomes.commands`` entry-point
group (``kopf-outcomes-testing`` adds ``cluster``). They are imported only when invoked (or
listed in ``--help``), so ``kopf-outcomes --version`` or ``check-policy`` pay nothing for them.
"""
from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

import click

from kopf_outcomes._version import __version__

COMMANDS_GROUP = "kopf_outcomes.commands"

# Commands that come with another distribution: named when missing, with what to install.
KNOWN_EXTERNAL = {"cluster": "kopf-outcomes-testing"}


class _Commands(click.Group):
    """A group that adds the commands of installed distributions, loading each on use."""

    def _external(self) -> dict[str, EntryPoint]:
        return {ep.name: ep for ep in entry_points(group=COMMANDS_GROUP) if ep.name not in self.commands}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._external()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        entry = self._external().get(cmd_name)
        if entry is None:
            return None
        loaded = entry.load()
        if not isinstance(loaded, click.Command):
            raise click.ClickException(f"entry point {entry.value!r} (group {COMMANDS_GROUP}) is not a"
                                       f" click command, but {type(loaded).__name__}")
        return loaded

    def resolve_command(self, ctx: click.Context,
                        args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else None
        if name in KNOWN_EXTERNAL and self.get_command(ctx, name) is None:
            raise click.UsageError(f"`{name}` comes with the {KNOWN_EXTERNAL[name]} package,"
                                   f" which is not installed: pip install {KNOWN_EXTERNAL[name]}", ctx)
        return super().resolve_command(ctx, args)


@click.group(cls=_Commands)
@click.version_option(__version__, prog_name="kopf-outcomes")
def main() -> None:
    """Outcomes for Kopf handlers: policies, plugins (and the local cluster, with kopf-outcomes-testing)."""


def _register_commands() -> None:
    from kopf_outcomes.plugins_cli import plugins
    from kopf_outcomes.policy.cli import check_policy, explain

    main.add_command(check_policy)
    main.add_command(explain)
    main.add_command(plugins)


_register_commands()
