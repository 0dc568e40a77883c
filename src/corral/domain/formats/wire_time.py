"""Times on the wire: naive UTC ISO 8601, ``2026-11-27T05:50:57.941529``, as OSMO sends them.

OSMO's clients parse only that form (``datetime.strptime`` without a zone); a ``+00:00`` suffix
breaks ``osmo workflow query`` and ``osmo config history``. Every time corral's API answers with
goes through :func:`wire_time`, so that one form is used from one endpoint to the next.
"""

from __future__ import annotations

from datetime import UTC, datetime


def as_utc(moment: datetime) -> datetime:
    """``moment`` with a zone: a naive one is UTC (SQLite hands stored times back naive, and
    every time corral stores or sends is UTC)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def in_utc(moment: datetime) -> datetime:
    """``moment`` in UTC (a naive one is UTC already); ValueError when UTC has no such moment:
    ``0001-01-01T00:00:00+14:00`` is in the year 0 there. PostgreSQL stores such a time, and
    no Python reader can read it back, so no time that comes in may be one."""
    try:
        return as_utc(moment).astimezone(UTC)
    except OverflowError:
        raise ValueError(
            f"{moment.isoformat()} is not a time between the years 1 and 9999 in UTC"
        ) from None


def wire_time(moment: datetime) -> str:
    """``moment`` in UTC without a zone suffix (a naive ``moment`` is taken to be UTC)."""
    return as_utc(moment).astimezone(UTC).replace(tzinfo=None).isoformat()


def optional_wire_time(moment: datetime | None) -> str | None:
    return None if moment is None else wire_time(moment)


def read_wire_time(value: str) -> datetime:
    """A time as :func:`wire_time` wrote it (UTC)."""
    return as_utc(datetime.fromisoformat(value))
