"""The ``kopf-outcomes`` console script: one click group, one sub-module per command family."""
from __future__ import annotations

import click


@click.group()
@click.version_option(package_name="kopf-outcomes")
def main() -> None:
    """Outcomes for Kopf handlers: local cluster, policies, plugins."""


def _register_commands() -> None:
    from kopf_outcomes.cluster.cli import cluster
    from kopf_outcomes.diagnosis.cli import stuck, why
    from kopf_outcomes.plugins_cli import plugins
    from kopf_outcomes.policy.cli import check_policy, explain

    main.add_command(cluster)
    main.add_command(check_policy)
    main.add_command(explain)
    main.add_command(plugins)
    main.add_command(why)
    main.add_command(stuck)


_register_commands()
