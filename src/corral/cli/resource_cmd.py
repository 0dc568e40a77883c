"""``corral resource ...``: the nodes behind the pools, and what their pods use.

``resource list`` prints OSMO's resource table (``GET /api/resources``): one row per node, pool
and platform, the node and its type on its first row, ``used/capacity`` per resource (or what
is free with ``--mode free``) and a sum row that counts each node once. ``resource info NODE``
shows one node (``GET /api/resources/{node}``). See docs/resources.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any
from urllib.parse import quote

import typer

from corral.cli.client import Client
from corral.cli.output import FormatOption, OutputFormat, echo, handle_errors, print_json
from corral.cli.paging import LimitOption, OffsetOption, page_footer, page_params
from corral.cli.pool_cmd import Mode, ModeOption, columns_text

app = typer.Typer(
    rich_markup_mode=None,
    help="Inspect the nodes of the pools: what they have and what their pods use.",
    no_args_is_help=True,
)

#: The resource columns: header and the key of the API's amounts, in OSMO's order.
RESOURCE_COLUMNS = (
    ("Storage [Gi]", "storage"),
    ("CPU [#]", "cpu"),
    ("Memory [Gi]", "memory"),
    ("GPU [#]", "gpu"),
)
NO_POOL = "-"
EMPTY = "There are no available resources."


@app.command("list")
@handle_errors
def list_resources(
    pools: Annotated[
        list[str] | None,
        typer.Option(
            "--pool", "-p", help="Only this pool (repeat for several; default: all yours)."
        ),
    ] = None,
    platforms: Annotated[
        list[str] | None,
        typer.Option("--platform", "-pl", help="Only this platform (repeat for several)."),
    ] = None,
    include_all: Annotated[
        bool, typer.Option("--all", "-a", help="Also list the nodes no pool uses.")
    ] = False,
    mode: ModeOption = Mode.used,
    output: FormatOption = OutputFormat.text,
    offset: OffsetOption = 0,
    limit: LimitOption = None,
) -> None:
    """The nodes of your pools, a page of pools at a time: one row per node, pool and
    platform."""
    found = Client().get(
        "/api/resources",
        pools=list(pools or []) or None,
        platforms=list(platforms or []) or None,
        all="true" if include_all else None,
        **page_params(offset, limit, named=len(pools or [])),
    )
    if output is OutputFormat.json:
        print_json(found)
        return
    footer = page_footer(found.get("page"), "corral resource list", limit)
    if not found["resources"]:
        echo(EMPTY)
        if footer:
            echo(footer)
        return
    echo("\n".join(resource_table(found, mode)))
    closed = closed_lines(found["resources"])
    if closed:
        echo()
        echo("\n".join(closed))
    queues = found.get("pool_queues") or []
    if queues:
        echo()
        echo("\n".join(queue_line(queue) for queue in queues))
    if footer:
        echo()
        echo(footer)


def queue_line(queue: Mapping[str, Any]) -> str:
    """A pool's GPU queue under the table: ``nvl72: GPUs guaranteed 64, maximum 72; 80 in
    use, 16 borrowed above the guarantee, 72 preempted in the last 24 h (0.50 GPU-h lost)``."""

    def limit(value: int) -> str:
        return "none" if value < 0 else str(value)

    return (
        f"{queue['pool']}: GPUs guaranteed {limit(queue['guarantee'])}, maximum "
        f"{limit(queue['maximum'])}; {queue['used']} in use, {queue['borrowed']} borrowed above "
        f"the guarantee, {queue['preempted']} preempted in the last 24 h"
        f"{_lost(queue.get('lost_gpu_hours', 0.0))}"
    )


def _lost(gpu_hours: float) -> str:
    """`` (0.50 GPU-h lost)``: what the preempted gangs lost since their checkpoints."""
    return f" ({gpu_hours:.2f} GPU-h lost)" if gpu_hours else ""


def resource_table(found: Mapping[str, Any], mode: Mode) -> list[str]:
    """The lines of the ``resource list`` table."""
    rows = []
    for node in found["resources"]:
        cells = amount_cells(node, mode)
        placements = [(p["pool"], p["platform"]) for p in node["pools"]] or [(NO_POOL, NO_POOL)]
        for index, (pool, platform) in enumerate(placements):
            first = index == 0
            rows.append(
                [
                    node["node"] if first else "",
                    pool,
                    platform,
                    node["type"] if first else "",
                    *cells,
                ]
            )
    total = ["", "", "", "", *amount_cells(found["resource_sum"], mode)]
    header = ["Node", "Pool", "Platform", "Type", *(title for title, _ in RESOURCE_COLUMNS)]
    return columns_text([header], rows, total)


def amount_cells(amounts: Mapping[str, Any], mode: Mode) -> list[str]:
    """``used/capacity`` or ``free`` per resource; ``0`` where there is none."""
    cells = []
    for _, key in RESOURCE_COLUMNS:
        used, capacity = amounts["used"][key], amounts["capacity"][key]
        if capacity <= 0:
            cells.append("0")
        elif mode is Mode.used:
            cells.append(f"{used}/{capacity}")
        else:
            cells.append(str(capacity - used))
    return cells


@app.command()
@handle_errors
def info(
    node: Annotated[str, typer.Argument(metavar="NODE", help="The node to show.")],
    pools: Annotated[
        list[str] | None,
        typer.Option("--pool", "-p", help="Only this pool (repeat for several)."),
    ] = None,
    platforms: Annotated[
        list[str] | None,
        typer.Option("--platform", "-pl", help="Only this platform (repeat for several)."),
    ] = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """One node: the pools and platforms it serves, its resources, and what the platforms
    allow (host network, privileged, mounts)."""
    found = Client().get(f"/api/resources/{quote(node, safe='')}")["resources"][0]
    served = [
        entry
        for entry in found["pools"]
        if (not pools or entry["pool"] in pools)
        and (not platforms or entry["platform"] in platforms)
    ]
    found = {**found, "pools": served}
    if output is OutputFormat.json:
        print_json(found)
        return
    echo("\n".join(info_text(found)))


def closed_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Under the table: each node that takes no new work, and why (docs/health.md); its free
    column reads 0."""
    closed = {row["node"]: row["closed"] for row in rows if row.get("closed")}
    return [f"{node} takes no new work: {reason}" for node, reason in sorted(closed.items())]


def info_text(found: Mapping[str, Any]) -> list[str]:
    lines = [f"Node {found['node']} ({found['type']})", ""]
    if found.get("closed"):
        lines[1:1] = [f"Takes no new work: {found['closed']}"]
    if found["pools"]:
        lines += columns_text(
            [["Pool", "Platform"]], [[p["pool"], p["platform"]] for p in found["pools"]]
        )
    else:
        lines.append("No pool of yours uses this node.")
    lines.append("")
    lines += columns_text(
        [["Resource", "Used", "Capacity", "Free"]],
        [
            [
                title,
                str(found["used"][key]),
                str(found["capacity"][key]),
                str(found["free"][key]),
            ]
            for title, key in RESOURCE_COLUMNS
        ],
    )
    for entry in found["pools"]:
        lines += ["", f"Platform {entry['platform']} of pool {entry['pool']}"]
        lines += [
            f"  Host network allowed: {yes_no(entry['host_network_allowed'])}",
            f"  Privileged allowed:   {yes_no(entry['privileged_allowed'])}",
            f"  Default mounts:       {listing(entry['default_mounts'])}",
            f"  Allowed mounts:       {listing(entry['allowed_mounts'])}",
        ]
    return lines


def yes_no(value: bool) -> str:
    return "yes" if value else "no"


def listing(values: Sequence[str]) -> str:
    return ", ".join(values) or "-"
