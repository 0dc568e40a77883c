"""``corral node ...``: cordon, drain, uncordon, fail and heal a node of the embedded cluster,
and its audited history (``/api/nodes/{node}/...``; docs/health.md#changing-a-nodes-health)."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

import typer

from corral.cli.client import Client
from corral.cli.output import FormatOption, OutputFormat, echo, handle_errors, print_json
from corral.domain.formats.durations import parse_duration

app = typer.Typer(
    rich_markup_mode=None,
    help="Change a node's health: cordon, drain, uncordon, fail and heal (needs node:Update).",
    no_args_is_help=True,
)

NodeArgument = Annotated[str, typer.Argument(help="The node's name.")]
ReasonOption = Annotated[
    str, typer.Option("--reason", "-r", help="Why, kept in the node's history.")
]


@app.command("cordon")
@handle_errors
def cordon(
    node: NodeArgument, reason: ReasonOption = "", output: FormatOption = OutputFormat.text
) -> None:
    """No new pod goes to NODE; what runs there keeps running."""
    _change(node, "cordon", {"reason": reason}, output)


@app.command("drain")
@handle_errors
def drain(
    node: NodeArgument,
    grace: Annotated[
        str,
        typer.Option(
            "--grace",
            help="How long before its stop each task gets notice: 30s, 5m or ISO 8601 (PT5M).",
        ),
    ] = "30s",
    reason: ReasonOption = "",
    output: FormatOption = OutputFormat.text,
) -> None:
    """Cordon NODE and stop what runs there, whole gangs, as a preemption would: each task
    gets a notice --grace ahead (docs/checkpoints.md), then its exit actions requeue or end
    it. `uncordon` ends the drain."""
    try:
        seconds = parse_duration(grace).total_seconds()
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--grace") from None
    _change(node, "drain", {"reason": reason, "grace_seconds": seconds}, output)


@app.command("uncordon")
@handle_errors
def uncordon(
    node: NodeArgument, reason: ReasonOption = "", output: FormatOption = OutputFormat.text
) -> None:
    """NODE takes new pods again."""
    _change(node, "uncordon", {"reason": reason}, output)


@app.command("fail")
@handle_errors
def fail(
    node: NodeArgument,
    fabric: Annotated[
        bool, typer.Option("--fabric", help="Cut the tray off its NVLink fabric only.")
    ] = False,
    reason: ReasonOption = "",
    output: FormatOption = OutputFormat.text,
) -> None:
    """The simulated NODE goes NotReady (with --fabric: loses its NVLink fabric)."""
    _change(node, "fail", {"reason": reason, "fabric": fabric}, output)


@app.command("heal")
@handle_errors
def heal(
    node: NodeArgument, reason: ReasonOption = "", output: FormatOption = OutputFormat.text
) -> None:
    """The simulated NODE is Ready again and its fabric healthy (a cordon stays)."""
    _change(node, "heal", {"reason": reason}, output)


@app.command("history")
@handle_errors
def history(node: NodeArgument, output: FormatOption = OutputFormat.text) -> None:
    """NODE's health changes made on a running server, newest first."""
    found = Client().get(f"/api/nodes/{quote(node, safe='')}/history")
    if output is OutputFormat.json:
        print_json(found)
        return
    if not found["changes"]:
        echo(f"Node {node} has not been changed on a running server.")
        return
    for change in found["changes"]:
        echo(change_line(change))


def _change(node: str, action: str, body: dict[str, Any], output: OutputFormat) -> None:
    answer = Client().request("POST", f"/api/nodes/{quote(node, safe='')}/{action}", json=body)
    if output is OutputFormat.json:
        print_json(answer)
        return
    echo(change_line(answer))


def change_line(change: dict[str, Any]) -> str:
    """``2026-11-27 12:00:00 alice cordon n9: 'PSU swap' (now: Ready, cordoned)``, the time
    in UTC to the second."""
    reason = f": {change['reason']!r}" if change["reason"] else ""
    at = str(change["at"])[:19].replace("T", " ")
    return (
        f"{at} {change['by']} {change['action']} {change['node']}{reason} "
        f"(now: {state_text(change['after'])})"
    )


def state_text(health: dict[str, Any]) -> str:
    """What a node's health says, shortest first: ``Ready``, ``NotReady, cordoned``."""
    parts = ["Ready" if health["ready"] else "NotReady"]
    if health.get("drain_grace_s") is not None:
        parts.append("drained")
    elif health["cordoned"]:
        parts.append("cordoned")
    if health["fabric"] != "healthy":
        parts.append(f"fabric {health['fabric']}")
    return ", ".join(parts)
