"""A task reports a committed checkpoint (docs/checkpoints.md): ``POST
/api/workflow/{id}/task/{task}/checkpoint`` and ``corral task checkpoint``. Its time is what a
preemption weighs: the work a victim would lose is counted from it."""

from __future__ import annotations

from datetime import datetime

from corral.domain.workflows.record import StoredTask, StoredWorkflow
from corral.domain.workflows.statuses import TaskStatus
from corral.errors import NotFoundError, UserError
from corral.store.workflows import WorkflowStore
from corral.store.workflows.checkpoints import Checkpoint

__all__ = ["Checkpoint", "report_checkpoint"]


def report_checkpoint(
    store: WorkflowStore,
    workflow: StoredWorkflow,
    task_name: str,
    checkpoint: Checkpoint,
    now: datetime,
) -> StoredTask:
    """Record ``checkpoint`` for the running task ``task_name`` of ``workflow`` (whose caller
    was checked); the task as it was. 404 for an unknown task; 400 for a checkpoint in the
    future, or a task that is not running."""
    task = next((t for group in workflow.groups for t in group.tasks if t.name == task_name), None)
    if task is None:
        raise NotFoundError(f"Task {task_name} not found in workflow {workflow.workflow_id}.")
    if checkpoint.at > now:
        raise UserError(
            f"Field 'at' ({checkpoint.at.isoformat()}) is in the future (the server's time is "
            f"{now.isoformat()}): report a checkpoint once it is committed, with its time or "
            "none (now)."
        )
    if task.status != TaskStatus.RUNNING or not store.record_checkpoint(
        workflow.workflow_id, task.uuid, checkpoint
    ):
        status = store.get(workflow.workflow_id)
        current = next(t for g in status.groups for t in g.tasks if t.uuid == task.uuid)
        raise UserError(
            f"Task {task_name} of {workflow.workflow_id} is {current.status}, not RUNNING: only "
            "a running task reports checkpoints."
        )
    return task
