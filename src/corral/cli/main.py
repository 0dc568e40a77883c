"""Entry point of the ``corral`` command."""

from __future__ import annotations

from typing import Any

import typer

from corral.cli import (
    config_cmd,
    login_cmd,
    node_cmd,
    pool_cmd,
    queue_cmd,
    resource_cmd,
    shapes_cmd,
    task_cmd,
    user_cmd,
    workflow_cmd,
)
from corral.cli.server_cmd import server

app = typer.Typer(
    rich_markup_mode=None,
    name="corral",
    help="corral: an OSMO-compatible control plane for GPU clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.command()(server)
app.command("login")(login_cmd.login)
app.command("logout")(login_cmd.logout)
app.command("queue")(queue_cmd.queue)
app.add_typer(config_cmd.app, name="config")
app.add_typer(node_cmd.app, name="node")
pool_cmd.app.command("shapes")(shapes_cmd.shapes)
app.add_typer(pool_cmd.app, name="pool")
app.add_typer(resource_cmd.app, name="resource")
app.add_typer(task_cmd.app, name="task")
app.add_typer(user_cmd.app, name="user")
app.add_typer(user_cmd.profile_app, name="profile")
app.add_typer(workflow_cmd.app, name="workflow")


def main() -> None:
    build_command()(prog_name="corral")


def build_command() -> Any:
    """The ``corral`` command, its help as users read it."""
    command = typer.main.get_command(app)
    name_values(command)
    return command


def name_values(command: Any) -> None:
    """Show an option's value by its name (``--pool POOL``), never by its Python type
    (``<str>``), in every command's help. (Typer builds its own click objects, so they are
    recognised by what they have.)"""
    for param in command.params:
        if param.param_type_name == "argument":
            param.display_type_rich = lambda ctx: None  # its name says what it is
        elif getattr(param, "is_flag", True) is False and param.metavar is None:
            choices = param.type_descriptor.choices if param.type_descriptor.is_choice else None
            name = (param.name or "value").upper()
            param.metavar = "[" + "|".join(map(str, choices)) + "]" if choices else name
    for sub in getattr(command, "commands", {}).values():
        name_values(sub)
