"""``corral config history | diff | rollback | tag``: the revisions of the configuration."""

from __future__ import annotations

import difflib
import json
from datetime import datetime
from typing import Annotated, Any

import typer

from corral.cli.client import Client
from corral.cli.config_args import (
    DescriptionOption,
    TagsOption,
    TypeRef,
    current_revision,
    parse_refs,
    split_tags,
    written_revision,
)
from corral.cli.output import (
    FormatOption,
    OutputFormat,
    echo,
    fail,
    handle_errors,
    local_time,
    print_json,
    print_table,
)
from corral.domain.configs.config_type import ConfigType


def parse_when(text: str | None, option: str) -> str | None:
    """``YYYY-MM-DD`` or ``YYYY-MM-DDTHH:MM:SS`` in local time, as ISO 8601 with its offset."""
    if text is None:
        return None
    for layout in ("%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"):
        try:
            return datetime.strptime(text, layout).astimezone().isoformat()
        except ValueError:
            continue
    fail(f"{option}: invalid time {text!r}; use YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS (local time)")


@handle_errors
def history(
    config_type: Annotated[str | None, typer.Argument(metavar="TYPE")] = None,
    offset: Annotated[int, typer.Option(min=0, help="Skip this many newest entries.")] = 0,
    count: Annotated[int, typer.Option(min=1, max=1000, help="How many entries.")] = 20,
    order: Annotated[str, typer.Option(help="desc (newest first) or asc (by time).")] = "desc",
    name: Annotated[str | None, typer.Option(help="Only writes of this item.")] = None,
    revision: Annotated[int | None, typer.Option(help="Only this revision.")] = None,
    tags: Annotated[
        list[str] | None,
        typer.Option("--tags", "--tag", help="Only revisions with all these tags."),
    ] = None,
    at_timestamp: Annotated[
        str | None, typer.Option(help="The revision of each type current at this time.")
    ] = None,
    created_before: Annotated[str | None, typer.Option()] = None,
    created_after: Annotated[str | None, typer.Option()] = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """List config revisions (newest COUNT after OFFSET, sorted by ORDER)."""
    if order.lower() not in ("asc", "desc"):
        fail(f"--order must be asc or desc, not {order!r}")
    params: dict[str, Any] = {
        "config_types": [ConfigType.parse(config_type).value] if config_type else None,
        "offset": offset,
        "limit": count,
        "order": order.upper(),
        "name": name,
        "revision": revision,
        "tags": split_tags(tags) or None,
        "at_timestamp": parse_when(at_timestamp, "--at-timestamp"),
        "created_before": parse_when(created_before, "--created-before"),
        "created_after": parse_when(created_after, "--created-after"),
        "omit_data": "false" if output is OutputFormat.json else "true",
    }
    found = Client().get("/api/configs/history", **params)
    if output is OutputFormat.json:
        print_json(found)
        return
    print_table(
        ["Config Type", "Name", "Revision", "Username", "Created At", "Description", "Tags"],
        [
            [
                c["config_type"],
                c["name"],
                str(c["revision"]),
                c["username"],
                local_time(c["created_at"]),
                c["description"],
                ", ".join(c["tags"]),
            ]
            for c in found["configs"]
        ],
    )


# ---------------------------------------------------------------------------------- diff


@handle_errors
def diff(
    revisions: Annotated[
        list[str],
        typer.Argument(
            metavar="TYPE[:REV] [TYPE[:REV]]",
            help="Two revisions (POOL:2 POOL:3, or POOL 2 3); a missing one, or one without "
            "REV, is the current config.",
        ),
    ],
    output: FormatOption = OutputFormat.text,
) -> None:
    """Show what changed between two revisions of a type (a unified diff of the JSON)."""
    refs = parse_refs(revisions, most=2)
    left = refs[0]
    right = refs[1] if len(refs) > 1 else TypeRef(left.ctype, None)
    if right.ctype is not left.ctype:
        fail(
            f"both sides of a diff must be the same config type, not {left.ctype.value} and "
            f"{right.ctype.value}"
        )
    found = Client().get(
        "/api/configs/diff",
        config_type=left.ctype.value,
        first_revision=left.revision,
        second_revision=right.revision,
    )
    if output is OutputFormat.json:
        print_json(found)
        return
    text = unified_diff(found["first_data"], found["second_data"], left.label, right.label)
    echo(text.rstrip("\n") if text else "No differences.")


def unified_diff(before: Any, after: Any, before_label: str, after_label: str) -> str:
    def lines(data: Any) -> list[str]:
        return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").splitlines(
            keepends=True
        )

    return "".join(difflib.unified_diff(lines(before), lines(after), before_label, after_label))


# ------------------------------------------------------------------------------ rollback


@handle_errors
def rollback(
    target: Annotated[
        list[str], typer.Argument(metavar="TYPE:REV", help="e.g. POOL:3 (or POOL 3).")
    ],
    description: DescriptionOption = None,
    tags: TagsOption = None,
) -> None:
    """Make the config of TYPE equal to revision REV again (as a new revision)."""
    (ref,) = parse_refs(target, most=1)
    if ref.revision is None:
        fail(f"give the revision to roll back to: {ref.ctype.value}:REV, e.g. {ref.ctype.value}:3")
    body: dict[str, Any] = {"config_type": ref.ctype.value, "revision": ref.revision}
    if description is not None:
        body["description"] = description
    if split_tags(tags):
        body["tags"] = split_tags(tags)
    client = Client()
    result = client.request("POST", "/api/configs/history/rollback", json=body)
    revision = written_revision(result, ref.ctype)
    if revision is None:
        echo(
            f"{ref.ctype.value} unchanged: it already equals r{ref.revision} "
            f"(revision {current_revision(client, ref.ctype)})"
        )
    else:
        echo(f"{ref.ctype.value} rolled back to r{ref.revision}: now revision {revision}")


# ----------------------------------------------------------------------------------- tag


@handle_errors
def tag(
    target: Annotated[
        list[str],
        typer.Argument(metavar="TYPE[:REV]", help="POOL:3 or POOL 3; without REV: current."),
    ],
    set_tags: Annotated[list[str] | None, typer.Option("--set", help="Tags to add.")] = None,
    delete_tags: Annotated[
        list[str] | None, typer.Option("--delete", help="Tags to remove.")
    ] = None,
) -> None:
    """Add or remove tags of a revision."""
    (ref,) = parse_refs(target, most=1)
    adding, removing = split_tags(set_tags), split_tags(delete_tags)
    if not adding and not removing:
        fail("give tags to add (--set T) or to remove (--delete T)")
    client = Client()
    revision = ref.revision or current_revision(client, ref.ctype)
    if not revision:
        fail(f"{ref.ctype.value} has no revisions yet")
    answer = client.request(
        "POST",
        f"/api/configs/history/{ref.ctype.url_segment}/revision/{revision}/tags",
        json={"set_tags": adding, "delete_tags": removing},
    )
    echo(
        f"{answer['config_type']} r{answer['revision']} tags: "
        f"{', '.join(answer['tags']) or '(none)'}"
    )
