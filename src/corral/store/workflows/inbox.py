"""The controller's inbox: a row per submission and cancel, written in the same transaction
as what it announces, read by the controller in order, and deleted with the tick that saw it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, Engine, delete, select

from corral.store.tables import controller_inbox
from corral.store.workflows.records import InboxEntry
from corral.store.workflows.writes import CHUNK

#: What the inbox says of a workflow: submitted, cancel requested, or to be failed (its stored
#: state could not be read: ``unreadable.py``).
SUBMITTED, CANCEL, FAILED = "submitted", "cancel", "failed"


def tell_controller(connection: Connection, workflow_id: str, kind: str, now: datetime) -> None:
    connection.execute(
        controller_inbox.insert(), {"workflow_id": workflow_id, "kind": kind, "created_at": now}
    )


def read_inbox(engine: Engine, limit: int) -> list[InboxEntry]:
    """What the controller has not seen yet, oldest first."""
    with engine.connect() as connection:
        rows = connection.execute(
            select(controller_inbox.c.id, controller_inbox.c.workflow_id, controller_inbox.c.kind)
            .order_by(controller_inbox.c.id)
            .limit(limit)
        ).all()
    return [InboxEntry(row.id, row.workflow_id, row.kind) for row in rows]


def mark_seen(connection: Connection, entry_ids: Sequence[int]) -> None:
    """Delete the entries a tick has seen."""
    for start in range(0, len(entry_ids), CHUNK):
        done = entry_ids[start : start + CHUNK]
        connection.execute(delete(controller_inbox).where(controller_inbox.c.id.in_(done)))
