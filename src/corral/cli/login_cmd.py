"""``corral login [URL]`` and ``corral logout [URL]`` (docs/cli.md#login).

Signing in goes through the server's OpenID Connect provider (``cli/sign_in.py``): the device
flow when the provider offers it, else a browser. ``--token`` keeps a token pasted on standard
input instead (an API token, or any token the server accepts); a token is never an argument,
since a command line is visible to every user of the machine.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated, Any

import typer

from corral.cli import sign_in
from corral.cli.client import Client, url_problem
from corral.cli.output import echo, fail, handle_errors
from corral.credentials import credentials_file, forget, server_url, store_token


class Method(StrEnum):
    device = "device"
    browser = "browser"


UrlArgument = Annotated[
    str | None,
    typer.Argument(
        metavar="URL",
        help="The corral server, e.g. https://corral.example.com [default: CORRAL_URL, else "
        "the server the credentials file knows].",
    ),
]


def _say(text: str) -> None:
    typer.echo(text, err=True)


@handle_errors
def login(
    url: UrlArgument = None,
    token: Annotated[
        bool,
        typer.Option(
            "--token",
            help="Keep a token read from standard input (an API token) instead of signing in "
            "through the provider.",
        ),
    ] = False,
    method: Annotated[
        Method | None,
        typer.Option(help="How to sign in [default: device when the provider offers it]."),
    ] = None,
) -> None:
    """Sign in to a corral server and keep the credentials for it (mode 0600)."""
    target = _server(url)
    if token:
        _keep_pasted_token(target)
    else:
        info = sign_in.login_info(target)
        use_device = method is Method.device or (method is None and info.device_endpoint)
        if use_device and not info.device_endpoint:
            fail("The server's provider offers no device sign-in; use --method browser.")
        flow = sign_in.device_flow if use_device else sign_in.browser_flow
        tokens = flow(info, _say)
        sign_in.remember(target, info.token_endpoint, info.client_id, tokens)
    _greet(target)


@handle_errors
def logout(url: UrlArgument = None) -> None:
    """Forget the credentials kept for a server."""
    target = _server(url)
    if forget(target):
        echo(f"Logged out of {target}.")
    else:
        echo(f"Not logged in to {target} ({credentials_file()} holds nothing for it).")


def _server(url: str | None) -> str:
    target = (url or server_url()).rstrip("/")
    problem = url_problem(target)
    if problem:
        fail(f"{target} is not a server address: {problem}. Write it as http://HOST:PORT.")
    return target


def _keep_pasted_token(target: str) -> None:
    interactive = sys.stdin.isatty()
    pasted = typer.prompt("Token", hide_input=True) if interactive else sys.stdin.readline()
    pasted = pasted.strip()
    if not pasted:
        fail("No token on standard input: paste one (an admin makes one: corral user token USER).")
    Client(target, token=pasted).get("/api/profile/settings")  # refused before it is kept
    store_token(target, pasted)


def _greet(target: str) -> None:
    profile: Any = Client(target).get("/api/profile/settings")
    name = profile["profile"]["username"]
    roles = list(profile["roles"])  # as `corral profile show` lists them
    echo(f"Logged in to {target} as {name} (roles: {', '.join(roles) or 'none'}).")
    if not [role for role in roles if role != "osmo-default"]:
        _say(
            f"WARNING: {name} holds no corral role, so most requests will be refused: an admin "
            "maps one of your groups to a role (its external_roles), or grants one: corral "
            f"user roles add {name} osmo-user"
        )
