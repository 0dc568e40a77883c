"""How the CLI talks back: tables and JSON on stdout, one-line errors on stderr.

The rules every verb follows:

* ``--format json`` prints exactly one JSON document on stdout and nothing else there.
* A failure prints a message on stderr (``error: ...``, or ``FILE:LINE:COL: ...`` when it can
  point into a file), nothing on stdout, and exits with status 1. No traceback for a user mistake.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, NoReturn, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from corral.cli.client import ApiError
from corral.domain.formats.wire_time import as_utc
from corral.errors import CorralError

P = ParamSpec("P")
R = TypeVar("R")

# A message that already starts with ``file:line:column:`` (syntax errors from corral.files).
_LOCATED = re.compile(r"^\S+:\d+:\d+: ")


class OutputFormat(StrEnum):
    text = "text"
    json = "json"


FormatOption = Annotated[
    OutputFormat,
    typer.Option(
        "--format",
        "--format-type",
        "-t",
        case_sensitive=False,
        help="text (tables) or json (one JSON document on stdout).",
    ),
]


def fail(message: str, *, located: bool = False) -> NoReturn:
    """Print ``message`` on stderr and exit 1; ``located`` messages start with FILE:LINE:COL."""
    typer.echo(message if located or _LOCATED.match(message) else f"error: {message}", err=True)
    raise typer.Exit(1)


def handle_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn the errors a user can cause (bad file, bad request, no server) into ``fail``."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except ApiError as err:
            fail(err.message)
        except CorralError as err:
            fail(err.to_dict()["message"])

    return run


def print_warnings(answer: Any) -> None:
    """The ``warnings`` of an API answer, one ``WARNING:`` line each on stderr."""
    warnings = answer.get("warnings") if isinstance(answer, dict) else None
    for warning in warnings or []:
        typer.echo(f"WARNING: {warning}", err=True)


def print_json(document: Any) -> None:
    """One JSON document on stdout (indent 2, key order as received)."""
    typer.echo(json.dumps(document, indent=2, ensure_ascii=False))


def echo(text: str = "") -> None:
    """Plain text on stdout (no markup: config values may contain brackets)."""
    typer.echo(text)


def print_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A table on stdout; cells are plain text, never markup. On a terminal, long cells wrap
    to fit its width (an ID or a domain is never cut short); piped, every line is as long as
    its content needs."""
    table = Table(*(Column(name, overflow="fold") for name in columns), header_style="bold")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    table_console().print(table)


def table_console() -> Console:
    """A console that wraps at the terminal's width, or never when stdout is not a terminal."""
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(highlight=False, soft_wrap=False, width=_UNLIMITED)
    return console


#: Wide enough for any table corral prints; rich then sizes the table to its content.
_UNLIMITED = 100_000


def local_time(timestamp: str) -> str:
    """An ISO timestamp from the API (naive UTC, as OSMO's) as ``YYYY-MM-DD HH:MM:SS`` in the
    local time zone."""
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        return timestamp
    return as_utc(moment).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def compact(value: Any) -> str:
    """A value as short JSON (for change lists)."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def dotted(path: Sequence[str | int]) -> str:
    return ".".join(str(step) for step in path) or "(whole document)"
