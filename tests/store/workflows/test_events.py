"""The controller's events (``domain/workflows/events.py``) are written as rows of their tables
(``store/workflows/events.py``) by the commit of the tick that records them."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, Table, select

from corral.domain.workflows.events import GangEvicted, GangStopped, NodeFaulted, StopCause
from corral.domain.workflows.record import Changes
from corral.services.runtime import utc_now
from corral.store.workflows import WorkflowStore
from corral.store.workflows.events import TABLES

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("event", sorted(TABLES, key=lambda kind: kind.__name__))
def test_each_event_has_its_tables_columns(event: type) -> None:
    """A field the table lacks (or a column the event lacks) fails here, not in a tick."""
    table: Table = TABLES[event]
    columns = {column.name for column in table.columns if column.name != "id"}
    assert {field.name for field in dataclasses.fields(event)} == columns


def test_a_commit_writes_the_events_it_carries(engine: Engine) -> None:
    evicted = GangEvicted(NOW, "p", "w-1", "g1", 8, "w-2", reclaimed=True)
    faulted = NodeFaulted(NOW, "p", "w-1", "g2", "node-3", "NotReady for 300 s", 4, 120.5)
    stopped = GangStopped(
        NOW,
        "p",
        "w-1",
        "g1",
        StopCause.RECLAIMED,
        8,
        lost_gpu_seconds=40.0,
        acknowledged=True,
        stop_seconds=2.5,
    )
    changes = Changes(preemptions=[evicted], node_faults=[faulted], eviction_stops=[stopped])
    WorkflowStore(engine, utc_now).commit(changes)
    with engine.connect() as connection:
        for event in (evicted, faulted, stopped):
            table = TABLES[type(event)]
            columns = [table.c[field.name] for field in dataclasses.fields(event)]
            (row,) = connection.execute(select(*columns)).all()
            written = dict(zip([c.name for c in columns], row, strict=True))
            written["at"] = written["at"].replace(tzinfo=UTC)  # SQLite keeps no zone
            assert written == dataclasses.asdict(event)
