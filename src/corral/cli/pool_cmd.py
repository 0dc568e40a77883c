"""``corral pool ...``: views of a pool.

``pool list`` prints OSMO's GPU quota table (``GET /api/pool_quota``, docs/resources.md).
``pool topology`` lists the topology keys workflows may use. ``pool render`` asks the server
(``GET /api/pool/{pool}/render``) to merge and render one platform of a pool for a sample task,
and prints the result: the pod template, which template set each field, the default variables,
node selector and tolerations, the resource validation rules in effect and the group templates.
See ``docs/templates.md``.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Any
from urllib.parse import quote

import typer
import yaml
from rich.console import Console
from rich.text import Text

from corral.cli.client import Client
from corral.cli.output import (
    FormatOption,
    OutputFormat,
    echo,
    fail,
    handle_errors,
    print_json,
    print_table,
)
from corral.cli.paging import LimitOption, OffsetOption, page_footer, page_params

app = typer.Typer(
    rich_markup_mode=None,
    help="Pools you may use: quota and usage (list), what a platform's templates render to "
    "(render), the topology keys a workflow may use (topology), free shapes per rack or "
    "clique (shapes).",
    no_args_is_help=True,
)


# ------------------------------------------------------------------------------------ list


class Mode(StrEnum):
    used = "used"
    free = "free"


ModeOption = Annotated[
    Mode,
    typer.Option(
        "--mode",
        "-m",
        case_sensitive=False,
        help="used: what is used out of what there is; free: what is left.",
    ),
]

#: The GPU columns of ``pool list`` per mode: (header, resource_usage field). OSMO's, then
#: corral's queue figures (docs/resources.md).
QUOTA_COLUMNS = {
    Mode.used: (
        ("Quota Used", "quota_used"),
        ("Quota Limit", "quota_limit"),
        ("Total Usage", "total_usage"),
        ("Total Capacity", "total_capacity"),
        ("Healthy", "healthy_capacity"),
        ("Maximum", "quota_maximum"),
        ("Borrowed", "borrowed"),
        ("Preempted 24h", "preempted"),
    ),
    Mode.free: (("Quota Free", "quota_free"), ("Total Free", "total_free")),
}
#: The column that shows the node set's capacity (marked when shared).
SHARED_COLUMNS = ("total_capacity", "healthy_capacity", "total_free")
SHARED_SUFFIX = " (shared)"


@app.command("list")
@handle_errors
def list_pools(
    pools: Annotated[
        list[str] | None,
        typer.Option("--pool", "-p", help="Only this pool (repeat for several)."),
    ] = None,
    mode: ModeOption = Mode.used,
    wide: Annotated[
        bool, typer.Option("--wide", "-w", help="Also show each pool's description.")
    ] = False,
    output: FormatOption = OutputFormat.text,
    offset: OffsetOption = 0,
    limit: LimitOption = None,
) -> None:
    """GPU quota and usage of the pools you may use, grouped by the nodes they share, a page
    of pools at a time (``GET /api/pool_quota``; see docs/resources.md)."""
    wanted = list(pools or [])
    client = Client()
    found = client.get(
        "/api/pool_quota",
        pools=wanted or None,
        **page_params(offset, limit, named=len(wanted)),
    )
    shown = {pool["name"] for node_set in found["node_sets"] for pool in node_set["pools"]}
    missing = [name for name in dict.fromkeys(wanted) if name not in shown]
    if missing and not shown:
        fail(f"{not_found(missing)}; {client.usable_pools_text()}")
    if output is OutputFormat.json:
        print_json(found)
    else:
        print_quota_table(found, mode, wide=wide)
        footer = page_footer(found.get("page"), "corral pool list", limit)
        if footer:
            echo(footer)
    if missing:
        typer.echo(f"WARNING: {not_found(missing)}; {client.usable_pools_text()}", err=True)


def not_found(names: Sequence[str]) -> str:
    plural = "s" if len(names) > 1 else ""
    return f"Pool{plural} {', '.join(names)} not found, or not yours to use"


NOTE_WIDTH = 96
#: Under the table: what the quota columns mean (docs/resources.md#corral-pool-list).
QUOTA_NOTE = (
    "Quota Limit is each pool's guarantee: its HIGH and NORMAL work runs within it. Maximum "
    "caps all of its work; LOW work (--priority LOW) may borrow idle GPUs above the guarantee, "
    "up to the maximum (Borrowed). A pool without a guarantee or maximum shows its capacity "
    "there. Healthy counts the GPUs of nodes that take new work (`corral resource list` says "
    "why the others do not)."
)


def print_quota_table(found: Mapping[str, Any], mode: Mode, *, wide: bool = False) -> None:
    """OSMO's pool table: a two-line header, one row per pool (the pools of a node set
    together, the shared capacity marked on all but the first), a separator and the sums;
    descriptions only when ``wide`` (they made the table 230 columns wide)."""
    node_sets = found["node_sets"]
    if not any(node_set["pools"] for node_set in node_sets):
        echo("No pools available")
        return
    columns = QUOTA_COLUMNS[mode]
    rows = []
    for node_set in node_sets:
        for index, pool in enumerate(node_set["pools"]):
            usage = pool["resource_usage"]
            cells = [
                str(usage[key]) + (SHARED_SUFFIX if index and key in SHARED_COLUMNS else "")
                for _, key in columns
            ]
            described = [pool["description"] or ""] if wide else []
            rows.append([pool["name"], *described, pool["status"], *cells])
    total = found["resource_sum"]
    lead = ["Pool", *(["Description"] if wide else []), "Status"]
    blank = [""] * len(lead)
    lines = columns_text(
        [
            [*lead, "GPU [#]"] + [""] * (len(columns) - 1),
            [*blank, *(title for title, _ in columns)],
        ],
        rows,
        [*blank, *(str(total[key]) for _, key in columns)],
    )
    echo("\n".join(lines))
    if mode is Mode.used:
        echo()
        echo(textwrap.fill(QUOTA_NOTE, width=NOTE_WIDTH))


# ---------------------------------------------------------------------------------- render


@app.command()
@handle_errors
def render(
    pool: Annotated[str, typer.Argument(metavar="POOL", help="The pool to render.")],
    platform: Annotated[
        str | None,
        typer.Option("--platform", "-p", help="The platform (default: the pool's default)."),
    ] = None,
    set_values: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="NAME=VALUE",
            help="A variable for the sample task, e.g. USER_GPU=8 (repeat for several).",
        ),
    ] = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Merge and render a platform's templates for a sample task, and show where each field
    came from."""
    params: dict[str, Any] = {"platform": platform, "set": list(set_values or []) or None}
    found = Client().get(f"/api/pool/{quote(pool, safe='')}/render", **params)
    if output is OutputFormat.json:
        print_json(found)
        return
    print_render(found)


@app.command()
@handle_errors
def topology(
    pool: Annotated[str, typer.Argument(metavar="POOL", help="The pool to show.")],
    output: FormatOption = OutputFormat.text,
) -> None:
    """Show the topology keys a workflow may use in this pool, coarsest level first."""
    found = Client().get(f"/api/pool/{quote(pool, safe='')}/topology")
    if output is OutputFormat.json:
        print_json(found)
        return
    keys = found["topology_keys"]
    if not keys:
        echo(f"Pool {found['pool']} has no topology keys; its workflows cannot use topology.")
        return
    print_table(
        ["Level", "Key", "Node label"],
        [[str(entry["level"]), entry["key"], entry["label"]] for entry in keys],
    )


def print_render(found: Mapping[str, Any]) -> None:
    """The human view of a ``pool render`` answer, one section after the other."""
    heading(f"Pool {found['pool']}, platform {found['platform']}")
    section("Pod template (rendered)")
    print_yaml(found["pod_template"])
    section("Where each field comes from")
    print_provenance(found["provenance"])
    section("Default variables")
    print_mapping(found["default_variables"], "Variable")
    section("Node selector")
    print_mapping(found["node_selector"], "Label")
    section("Tolerations")
    print_tolerations(found["tolerations"])
    section("Default mounts")
    echo("\n".join(found["default_mounts"]) or "(none)")
    section("Resource validation rules")
    print_rules(found["resource_validations"])
    section("Group templates (rendered)")
    print_group_templates(found["group_templates"])


# --------------------------------------------------------------------------------- pieces


def heading(title: str) -> None:
    Console(highlight=False).print(Text(title, style="bold underline"))


def section(title: str) -> None:
    echo()
    Console(highlight=False).print(Text(title, style="bold"))


def columns_text(
    header: Sequence[Sequence[str]],
    rows: Sequence[Sequence[str]],
    total: Sequence[str] | None = None,
    gap: int = 3,
) -> list[str]:
    """OSMO's plain table layout: left-aligned columns ``gap`` spaces apart, the header lines,
    a line of ``=``, the rows and, with ``total``, another line of ``=`` and the sum row.
    Plain text without borders, so scripts written against OSMO's output keep working."""
    every = [*header, *rows, *([total] if total is not None else [])]
    count = max(len(line) for line in every)
    widths = [
        max((len(line[i]) for line in every if i < len(line)), default=0) for i in range(count)
    ]
    separator = "=" * (sum(widths) + gap * (count - 1))

    def line(cells: Sequence[str]) -> str:
        padded = [cell.ljust(width) for cell, width in zip(cells, widths, strict=False)]
        return (" " * gap).join(padded).rstrip()

    lines = [line(cells) for cells in header]
    lines += [separator, *(line(cells) for cells in rows)]
    if total is not None:
        lines += [separator, line(total)]
    return lines


def print_yaml(document: Any) -> None:
    """A document as block YAML, keys in the order the server gave them."""
    echo(yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100).rstrip("\n"))


def cell(value: Any) -> str:
    """A value in a table cell: text as it is, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def names(values: Sequence[str]) -> str:
    return ", ".join(values)


def print_provenance(entries: Sequence[Mapping[str, Any]]) -> None:
    if not entries:
        echo("(no templates)")
        return
    repeated = any(entry.get("repeated_by") for entry in entries)
    columns = ["Field", "Value", "Set by", "Overrode"] + (["Repeated by"] if repeated else [])
    rows = [
        [
            entry["field"],
            cell(entry["value"]),
            entry["set_by"],
            names(entry["overrode"]),
            *([names(entry["repeated_by"])] if repeated else []),
        ]
        for entry in entries
    ]
    print_table(columns, rows)


def print_mapping(values: Mapping[str, Any], what: str) -> None:
    if not values:
        echo("(none)")
        return
    print_table([what, "Value"], [[name, cell(value)] for name, value in values.items()])


def print_tolerations(tolerations: Sequence[Any]) -> None:
    if not tolerations:
        echo("(none)")
        return
    fields = ["key", "operator", "value", "effect", "tolerationSeconds"]
    usual = all(isinstance(t, dict) and set(t) <= set(fields) for t in tolerations)
    used = [f for f in fields if usual and any(f in t for t in tolerations)]
    if not used:
        print_yaml(list(tolerations))  # not the usual shape: show it as it is
        return
    rows = [[cell(t.get(f, "")) for f in used] for t in tolerations]
    print_table([f[0].upper() + f[1:] for f in used], rows)


def print_rules(rules: Sequence[Mapping[str, Any]]) -> None:
    if not rules:
        echo("(none)")
        return
    print_table(
        ["Set", "Operator", "Left", "Right", "Message"],
        [
            [
                rule["set"],
                rule["operator"],
                rule["left_operand"],
                rule["right_operand"],
                rule["assert_message"],
            ]
            for rule in rules
        ],
    )


def print_group_templates(templates: Sequence[Mapping[str, Any]]) -> None:
    if not templates:
        echo("(none)")
        return
    for index, template in enumerate(templates):
        if index:
            echo("---")
        echo(f"# from {names(template['sources'])}")
        print_yaml(template["manifest"])
