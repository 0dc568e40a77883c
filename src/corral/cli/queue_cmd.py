"""``corral queue``: every waiting group, first to start first, with its start-time forecast
(``GET /api/queue``; docs/forecast.md#the-queue), in ``squeue --start``'s habits."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import typer

from corral.cli.client import Client
from corral.cli.output import FormatOption, OutputFormat, echo, handle_errors, print_json
from corral.cli.pool_cmd import columns_text
from corral.domain.formats.wire_time import read_wire_time
from corral.domain.views.forecast_accuracy import PoolAccuracy
from corral.domain.views.queue import start_text
from corral.domain.views.start_forecast import duration_text

HEADER = [
    "Pos",
    "Workflow",
    "Group",
    "Pool",
    "User",
    "Priority",
    "Shape",
    "Waiting",
    "Start (80%)",
    "Reason",
]


@handle_errors
def queue(
    pools: Annotated[
        list[str] | None, typer.Option("--pool", "-p", help="Only this pool (repeat for several).")
    ] = None,
    users: Annotated[
        list[str] | None, typer.Option("--user", "-u", help="Only this user's (repeat).")
    ] = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Every waiting group, first to start first: its position, wait so far and forecast
    start. Groups you may not read hold their place as `(hidden)`. Then, per pool, how often
    the published forecasts' 80% bands held and their median error."""
    found = Client().get("/api/queue", pools=pools or None, users=users or None)
    if output is OutputFormat.json:
        print_json(found)
        return
    if found["entries"]:
        now = read_wire_time(found["at"])
        rows = [_row(entry, now) for entry in found["entries"]]
        echo("\n".join(columns_text([HEADER], rows)))
    else:
        echo("Nothing waits.")
    if found["accuracy"]:
        echo("\nForecasts so far:")
        for pool in found["accuracy"]:
            echo(f"  {PoolAccuracy(**pool).text()}")


def _row(entry: dict[str, Any], now: datetime) -> list[str]:
    position = str(entry["position"]) if entry["position"] is not None else "-"
    if entry["hidden"]:
        return [position, "(hidden)", *[""] * (len(HEADER) - 2)]
    return [
        position,
        entry["workflow_id"],
        entry["group"],
        entry["pool"],
        entry["user"],
        entry["priority"],
        entry["shape"] or f"{entry['tasks']} tasks",
        duration_text(entry["waiting_s"]),
        start_text(entry, now),
        entry["reason"] or "",
    ]
