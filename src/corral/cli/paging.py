"""``--offset`` and ``--limit`` of the lists the server answers a page of (docs/api.md#pages),
and the line under a table that says which page it is and how to get the next."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import typer

from corral.domain.views.paging import DEFAULT_LIMIT, MAX_LIMIT

OffsetOption = Annotated[
    int,
    typer.Option(
        "--offset", min=0, help="Pools to skip, in name order (see the line under the table)."
    ),
]
LimitOption = Annotated[
    int | None,
    typer.Option(
        "--limit", min=1, max=MAX_LIMIT, help=f"Pools on the page (default {DEFAULT_LIMIT})."
    ),
]


def page_params(offset: int, limit: int | None, named: int = 0) -> dict[str, Any]:
    """The query of a page: nothing for the server's default first page; a page that holds
    every one of the ``named`` pools when the user names some."""
    if limit is None and named > DEFAULT_LIMIT:
        limit = min(named, MAX_LIMIT)
    return {"offset": offset or None, "limit": limit}


def page_footer(page: Mapping[str, Any] | None, command: str, limit: int | None) -> str:
    """``Pools 1 to 50 of 5,000; corral pool list --offset 50 shows the next 50.``, or ""
    when the answer holds every pool. ``limit`` is the one the user gave, kept in the hint."""
    if not page:
        return ""
    total, offset, next_offset = page["total"], page["offset"], page.get("next_offset")
    if next_offset is None and offset == 0:
        return ""
    if offset >= total:
        return f"No pools from {offset + 1:,} on: there are {total:,}."
    last = total if next_offset is None else next_offset
    shown = f"Pools {offset + 1:,} to {last:,} of {total:,}"
    if next_offset is None:
        return f"{shown}."
    more = min(page["limit"], total - next_offset)
    again = f"{command} --offset {next_offset}" + (f" --limit {limit}" if limit else "")
    return f"{shown}; {again} shows the next {more:,}."
