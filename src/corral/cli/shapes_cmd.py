"""``corral pool shapes POOL``: an ``sinfo`` for NVLink racks (``GET /api/pool/P/shapes``;
docs/forecast.md#free-shapes). Per domain of the pool's finest topology level: trays healthy,
free and in all, the largest gang of whole-node tasks the scheduler would place there now (and
what the nodes alone hold, where the quota or the fabric says less), and when it is next wholly
free."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from urllib.parse import quote

import typer

from corral.cli.client import Client
from corral.cli.output import FormatOption, OutputFormat, echo, handle_errors, print_json
from corral.cli.pool_cmd import columns_text
from corral.domain.formats.wire_time import read_wire_time
from corral.domain.views.queue import until_text

HEADER = [
    "Domain",
    "Trays",
    "Healthy",
    "Free",
    "Free GPUs",
    "Largest gang",
    "Physically",
    "Whole free",
]


@handle_errors
def shapes(
    pool: Annotated[str, typer.Argument(metavar="POOL", help="The pool to show.")],
    priority: Annotated[
        str,
        typer.Option(
            "--priority", help="For work of this priority: HIGH, NORMAL or LOW (LOW may borrow)."
        ),
    ] = "NORMAL",
    output: FormatOption = OutputFormat.text,
) -> None:
    """Per rack or clique (the pool's finest topology level): trays healthy, free and in all,
    the largest gang of whole-node tasks the scheduler would place there now, and when it is
    next wholly free."""
    found = Client().get(f"/api/pool/{quote(pool, safe='')}/shapes", priority=priority)
    if output is OutputFormat.json:
        print_json(found)
        return
    echo(summary(found))
    if found["domains"]:
        now = read_wire_time(found["at"])
        rows = [_row(domain, now) for domain in found["domains"]]
        echo("\n".join(columns_text([HEADER], rows)))


def summary(found: dict[str, Any]) -> str:
    """``Pool nvl72 by gpu-clique (nvidia.com/gpu.clique): ...``."""
    level = f" by {found['level']} ({found['label']})" if found["level"] else ""
    if not found["domains"]:
        return f"Pool {found['pool']}{level} has no nodes."
    task = max(domain["task_gpus"] for domain in found["domains"])
    fits = f"{found['largest_gang']} tasks of {task} GPUs" if task else "no GPU task"
    if found["largest_physically"] != found["largest_gang"]:
        fits += f" ({found['largest_physically']} physically; {found['quota']})"
    upcoming = found["next_whole_free"]
    whole = until_text(upcoming, read_wire_time(found["at"])) if upcoming else "not known"
    where = f"one {found['level']}" if found["level"] else "the pool"
    return (
        f"Pool {found['pool']}{level}, {found['priority']} work: the largest whole-node gang "
        f"in {where} now is {fits}; the next whole {found['level'] or 'pool'} is free "
        f"{_when(whole)}."
    )


def _when(text: str) -> str:
    if text == "not known":
        return "at a moment not known (not within the forecast, or not at this quota)"
    return text if text == "now" else f"in ~{text}"


def _row(domain: dict[str, Any], now: datetime) -> list[str]:
    whole = domain["whole_free_at"]
    if whole is None:
        free_at = "-" if domain["forecast_at"] is None else "over 7 d"
    else:
        free_at = until_text(whole, now)
        free_at = free_at if free_at == "now" else f"~{free_at}"
    return [
        domain["domain"],
        str(domain["trays"]),
        str(domain["healthy"]),
        str(domain["free"]),
        f"{domain['free_gpus']}/{domain['gpus']}",
        str(domain["largest_gang"]),
        str(domain["physical"]),
        free_at,
    ]
