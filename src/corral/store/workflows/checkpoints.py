"""A task's checkpoint report (docs/checkpoints.md): written on its row, only while it runs,
with a row of the controller's inbox that has the controller read the workflow again (the
scheduler weighs a victim's lost work from it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, select

from corral.domain.workflows.statuses import TaskStatus
from corral.store.database import writing
from corral.store.tables import workflow_groups, workflow_tasks
from corral.store.workflows.inbox import tell_controller

#: What the inbox says of a workflow one of whose tasks reported a checkpoint.
CHECKPOINT = "checkpoint"


@dataclass(frozen=True)
class Checkpoint:
    """A committed checkpoint: when, and optionally at which step, with what description."""

    at: datetime
    step: int | None = None
    description: str | None = None


def record_checkpoint(
    engine: Engine, workflow_id: str, task_uuid: str, checkpoint: Checkpoint, now: datetime
) -> bool:
    """Write ``checkpoint`` on the task's row if the task is RUNNING (False otherwise), and tell
    the controller."""
    with writing(engine) as connection:
        in_workflow = select(workflow_groups.c.group_uuid).where(
            workflow_groups.c.workflow_id == workflow_id
        )
        done = connection.execute(
            workflow_tasks.update()
            .where(workflow_tasks.c.task_uuid == task_uuid)
            .where(workflow_tasks.c.group_uuid.in_(in_workflow))
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
