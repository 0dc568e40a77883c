"""``corral user ...`` (users, their roles and tokens) and ``corral profile ...`` (yourself).

Users and role assignments follow OSMO's REST API (``/api/auth/user``, ``/api/auth/user/{id}/
roles``); managing users needs ``osmo-admin``. ``user token`` prints a new API token once: corral
keeps only its hash.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import quote

import typer

from corral.cli.client import Client
from corral.cli.output import (
    FormatOption,
    OutputFormat,
    echo,
    handle_errors,
    local_time,
    print_json,
    print_table,
)

app = typer.Typer(
    rich_markup_mode=None,
    help="Manage users, their roles and API tokens (admin).",
    no_args_is_help=True,
)
roles_app = typer.Typer(
    rich_markup_mode=None, help="Assign roles to a user, or take them away.", no_args_is_help=True
)
app.add_typer(roles_app, name="roles")
profile_app = typer.Typer(
    rich_markup_mode=None, help="Your own settings: roles, usable pools, default pool."
)

NameArgument = Annotated[str, typer.Argument(metavar="NAME", help="The username.")]


def user_path(name: str, *rest: str) -> str:
    return "/".join([f"/api/auth/user/{quote(name, safe='')}", *(quote(p, safe="") for p in rest)])


def show_user(user: Mapping[str, Any], output: OutputFormat) -> None:
    if output is OutputFormat.json:
        print_json(user)
        return
    print_table(
        ["Field", "Value"],
        [
            ["Username", user["id"]],
            ["Roles", role_names(user) or "(none)"],
            ["Default pool", user.get("default_pool") or "(none)"],
            ["Created", local_time(user["created_at"])],
            ["Created by", user["created_by"]],
        ],
    )


def role_names(user: Mapping[str, Any]) -> str:
    return ", ".join(role["role_name"] for role in user["roles"])


@app.command()
@handle_errors
def create(
    name: NameArgument,
    role: Annotated[
        list[str] | None, typer.Option("--role", "-r", help="A role to give (repeat).")
    ] = None,
    default_pool: Annotated[
        str | None, typer.Option("--default-pool", help="The user's default pool.")
    ] = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Create a user (with roles and a default pool)."""
    body = {"id": name, "roles": list(role or []), "default_pool": default_pool}
    show_user(Client().request("POST", "/api/auth/user", json=body), output)


@app.command("list")
@handle_errors
def list_users(output: FormatOption = OutputFormat.text) -> None:
    """List users and their roles."""
    found = Client().get("/api/auth/user", count=1000)
    if output is OutputFormat.json:
        print_json(found)
        return
    rows = [
        [u["id"], role_names(u), u.get("default_pool") or "", u["created_by"]]
        for u in found["users"]
    ]
    print_table(["Username", "Roles", "Default pool", "Created by"], rows)


@app.command()
@handle_errors
def show(name: NameArgument, output: FormatOption = OutputFormat.text) -> None:
    """Show one user."""
    show_user(Client().get(user_path(name)), output)


@app.command()
@handle_errors
def delete(name: NameArgument) -> None:
    """Delete a user and revoke all their tokens."""
    echo(Client().request("DELETE", user_path(name))["message"])


@app.command()
@handle_errors
def token(
    name: NameArgument,
    token_name: Annotated[
        str | None, typer.Option("--name", help="A label for the token (default: generated).")
    ] = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Mint an API token for the user and print it: it is shown this once only."""
    minted = Client().request("POST", user_path(name, "token"), json={"name": token_name})
    if output is OutputFormat.json:
        print_json(minted)
        return
    echo(minted["token"])
    typer.echo(
        f"Token {minted['name']} for {minted['username']}: store it now, it cannot be shown again.",
        err=True,
    )


@roles_app.command("add")
@handle_errors
def add_roles(
    name: NameArgument,
    roles: Annotated[list[str], typer.Argument(metavar="ROLE...", help="Roles to give.")],
    output: FormatOption = OutputFormat.text,
) -> None:
    """Give the user one or more roles."""
    client = Client()
    user: Mapping[str, Any] = {}
    for role in roles:  # OSMO's API grants one role per request
        user = client.request("POST", user_path(name, "roles"), json={"role_name": role})
    show_user(user, output)


@roles_app.command("remove")
@handle_errors
def remove_role(
    name: NameArgument,
    role: Annotated[str, typer.Argument(metavar="ROLE", help="The role to take away.")],
    output: FormatOption = OutputFormat.text,
) -> None:
    """Take a role away from the user (effective at their next request)."""
    show_user(Client().request("DELETE", user_path(name, "roles", role)), output)


# ---------------------------------------------------------------------------------- profile


def show_profile(found: Mapping[str, Any], output: OutputFormat) -> None:
    if output is OutputFormat.json:
        print_json(found)
        return
    print_table(
        ["Field", "Value"],
        [
            ["Username", found["profile"]["username"]],
            ["Roles", ", ".join(found["roles"]) or "(none)"],
            ["Default pool", found["profile"].get("pool") or "(none)"],
            ["Pools you may use", ", ".join(found["pools"]) or "(none)"],
        ],
    )


@profile_app.command("show")
@handle_errors
def profile_show(output: FormatOption = OutputFormat.text) -> None:
    """Who you are, your roles, and the pools you may submit to."""
    show_profile(Client().get("/api/profile/settings"), output)


@profile_app.command("set-pool")
@handle_errors
def profile_set_pool(
    pool: Annotated[str, typer.Argument(metavar="POOL", help="A pool you may use.")],
    output: FormatOption = OutputFormat.text,
) -> None:
    """Set your default pool."""
    found = Client().request("POST", "/api/profile/settings", json={"pool": pool})
    show_profile(found, output)
