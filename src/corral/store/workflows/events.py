"""The controller's events (``domain/workflows/events.py``) as rows of their tables: each
event's fields are its table's columns (the id aside), a test holds them equal."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Table, insert

from corral.domain.workflows.events import GangEvicted, GangStopped, NodeFaulted
from corral.store.tables import eviction_stops, node_faults, preemptions

#: The table of each kind of event.
TABLES: dict[type[Any], Table] = {
    GangEvicted: preemptions,
    NodeFaulted: node_faults,
    GangStopped: eviction_stops,
}


def write_events(
    connection: Connection, events: Sequence[GangEvicted | NodeFaulted | GangStopped]
) -> None:
    """Insert ``events``, one statement per table."""
    rows: dict[Table, list[dict[str, Any]]] = {}
    for event in events:
        rows.setdefault(TABLES[type(event)], []).append(dataclasses.asdict(event))
    for table, found in rows.items():
        connection.execute(insert(table), found)
