"""Entry point of the ``corral`` command."""

from __future__ import annotations

import typer

from corral.cli import config_cmd, pool_cmd, resource_cmd, user_cmd, workflow_cmd
from corral.cli.server_cmd import server

app = typer.Typer(
    name="corral",
    help="corral: an OSMO-compatible control plane for GPU clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.command()(server)
app.add_typer(config_cmd.app, name="config")
app.add_typer(pool_cmd.app, name="pool")
app.add_typer(resource_cmd.app, name="resource")
app.add_typer(user_cmd.app, name="user")
app.add_typer(user_cmd.profile_app, name="profile")
app.add_typer(workflow_cmd.app, name="workflow")


def main() -> None:
    app()
