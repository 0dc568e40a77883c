"""A page of a list that grows with the number of pools (docs/api.md#pages).

Lists of pools, their quotas and their nodes were answered whole: at 5,000 pools
``/api/resources`` was 22 MB and the pools page took seven seconds. A reader now gets one page
of pools, in name order, and the offset of the next; the figures on a page are worked out for
that page's pools only, so a page costs the same with 50 pools as with 5,000.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

#: Pools on a page when the reader does not say.
DEFAULT_LIMIT = 50
#: The most pools one page may hold.
MAX_LIMIT = 1000
#: The largest offset (a 32-bit count: more pools than any store holds).
MAX_OFFSET = 2**31 - 1

T = TypeVar("T")


@dataclass(frozen=True)
class Page:
    """Which part of a list to answer: ``limit`` items from ``offset`` (None: every item,
    for OSMO's CLI, which does not follow pages)."""

    offset: int = 0
    limit: int | None = DEFAULT_LIMIT

    def of(self, items: Sequence[T]) -> list[T]:
        """This page's items."""
        end = None if self.limit is None else self.offset + self.limit
        return list(items[self.offset : end])

    def next_offset(self, total: int) -> int | None:
        """Where the next page starts, or None when this one is the last."""
        if self.limit is None or self.offset + self.limit >= total:
            return None
        return self.offset + self.limit

    def about(self, total: int) -> dict[str, Any]:
        """The answer's ``page``: ``{offset, limit, total, next_offset}``."""
        return {
            "offset": self.offset,
            "limit": self.limit,
            "total": total,
            "next_offset": self.next_offset(total),
        }

    def words(self, total: int, noun: str = "pools") -> str:
        """``pools 51 to 100 of 5,000`` (or ``all 12 pools``), for a table's footer."""
        shown = len(self.of(range(total)))
        if shown == total:
            return f"all {total:,} {noun}"
        if not shown:
            return f"none of {total:,} {noun} (the offset {self.offset:,} is past the end)"
        return f"{noun} {self.offset + 1:,} to {self.offset + shown:,} of {total:,}"
