"""A task's checkpoint report and its "ready to stop" (docs/checkpoints.md): written on its
row, only while it runs, with a row of the controller's inbox that has the controller read the
workflow again (the scheduler weighs a victim's lost work from the checkpoint; a noticed gang
stops once every task is ready)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Engine, and_, select

from corral.domain.workflows.notices import Checkpoint
from corral.domain.workflows.statuses import TaskStatus
from corral.store.database import writing
from corral.store.tables import workflow_groups, workflow_tasks
from corral.store.workflows.inbox import tell_controller
from corral.store.workflows.records import utc

#: What the inbox says of a workflow one of whose tasks reported a checkpoint, or that it is
#: ready to stop.
CHECKPOINT, READY = "checkpoint", "ready"


def _task_of(workflow_id: str, task_uuid: str) -> Any:
    """The condition selecting the task ``task_uuid`` of workflow ``workflow_id``."""
    in_workflow = select(workflow_groups.c.group_uuid).where(
        workflow_groups.c.workflow_id == workflow_id
    )
    return and_(
        workflow_tasks.c.task_uuid == task_uuid, workflow_tasks.c.group_uuid.in_(in_workflow)
    )


def record_checkpoint(
    engine: Engine, workflow_id: str, task_uuid: str, checkpoint: Checkpoint, now: datetime
) -> bool:
    """Write ``checkpoint`` on the task's row if the task is RUNNING (False otherwise), and tell
    the controller."""
    with writing(engine) as connection:
        done = connection.execute(
            workflow_tasks.update()
            .where(_task_of(workflow_id, task_uuid))
            .where(workflow_tasks.c.status == TaskStatus.RUNNING.value)
            .values(
                checkpoint_at=checkpoint.at,
                checkpoint_step=checkpoint.step,
                checkpoint_note=checkpoint.description,
            )
        ).rowcount
        if done:
            tell_controller(connection, workflow_id, CHECKPOINT, now)
    return bool(done)


def record_ready(
    engine: Engine, workflow_id: str, task_uuid: str, now: datetime
) -> datetime | None:
    """Mark the RUNNING task ready to stop (a first "ready" counts: a later one changes
    nothing) and tell the controller; when it was marked, or None if it no longer runs."""
    with writing(engine) as connection:
        row = connection.execute(
            select(workflow_tasks.c.status, workflow_tasks.c.ready_at).where(
                _task_of(workflow_id, task_uuid)
            )
        ).first()
        if row is None or row.status != TaskStatus.RUNNING.value:
            return None
        if row.ready_at is not None:
            return utc(row.ready_at)
        connection.execute(
            workflow_tasks.update()
            .where(workflow_tasks.c.task_uuid == task_uuid)
            .values(ready_at=now)
        )
        tell_controller(connection, workflow_id, READY, now)
    return now
