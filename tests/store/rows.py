"""Rows written straight into the tables, for store tests that need a workflow to hang on."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, insert

from corral.store.tables import workflows


def insert_workflow(connection: Connection, submitted_at: datetime) -> str:
    """A running workflow ``w-1`` of pool ``p``, the least its row needs; its id."""
    connection.execute(
        insert(workflows).values(
            workflow_id="w-1",
            name="w",
            number=1,
            uuid="u1",
            pool="p",
            backend="b",
            namespace="n",
            status="RUNNING",
            priority="NORMAL",
            submitted_by="me",
            submitted_at=submitted_at,
            exec_timeout_s=1.0,
            queue_timeout_s=1.0,
            spec="",
        )
    )
    return "w-1"
