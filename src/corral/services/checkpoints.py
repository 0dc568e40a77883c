"""What a task tells corral and hears from it through the API (docs/checkpoints.md): its
committed checkpoints (``POST .../checkpoint``: preemption counts the work a victim would lose
from them), the notice of its stop (``GET .../notice``), and that it is ready to stop
(``POST .../ready``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from corral.domain.workflows.notices import Checkpoint, checkpoint_refusal, stop_message
from corral.domain.workflows.record import StoredGroup, StoredTask, StoredWorkflow
from corral.domain.workflows.statuses import TaskStatus
from corral.errors import ConflictError, NotFoundError, UserError
from corral.services.auth.task_tokens import TaskScope
from corral.store.workflows import WorkflowStore

__all__ = [
    "Checkpoint",
    "notice_view",
    "own_task_workflow",
    "owned_workflow",
    "report_checkpoint",
    "report_ready",
]


def owned_workflow(
    store: WorkflowStore, username: str, admin: bool, workflow_id: str
) -> StoredWorkflow:
    """The workflow, if ``username`` submitted it or is an ``admin``; else 404 (as for an
    unknown one: a task's reports are its owner's business)."""
    workflow = store.get(workflow_id)
    if username != workflow.submitted_by and not admin:
        raise NotFoundError(f"Workflow {workflow_id} not found.")
    return workflow


def own_task_workflow(
    store: WorkflowStore, scope: TaskScope, workflow_id: str, task_name: str
) -> StoredWorkflow:
    """The workflow, if a task token for ``scope`` may speak for its task ``task_name``: the
    token's own task, in its current attempt's workflow; else 404, as for anyone else."""
    missing = NotFoundError(f"Workflow {workflow_id} not found.")
    if (scope.workflow_id, scope.task_name) != (workflow_id, task_name):
        raise missing
    workflow = store.get(workflow_id)
    _, task = task_of(workflow, task_name)
    if task.uuid != scope.task_uuid:
        raise missing
    return workflow


def task_of(workflow: StoredWorkflow, task_name: str) -> tuple[StoredGroup, StoredTask]:
    """The task named ``task_name`` and its group; 404 when there is none."""
    for group in workflow.groups:
        for task in group.tasks:
            if task.name == task_name:
                return group, task
    raise NotFoundError(f"Task {task_name} not found in workflow {workflow.workflow_id}.")


def notice_view(workflow: StoredWorkflow, task_name: str, now: datetime) -> dict[str, Any]:
    """The task's notice as the API answers it (``notice`` null while there is none)."""
    group, task = task_of(workflow, task_name)
    notice = None
    if group.notice_at is not None and group.notice_deadline is not None:
        left = (group.notice_deadline - now).total_seconds()
        notice = {
            "given_at": group.notice_at.isoformat(),
            "deadline": group.notice_deadline.isoformat(),
            "seconds_left": round(max(left, 0.0), 3),
            "reason": stop_message(group.preempted_by),
        }
    return {
        "workflow_id": workflow.workflow_id,
        "task": task_name,
        "status": task.status,
        "notice": notice,
        "ready_at": task.ready_at.isoformat() if task.ready_at else None,
        "checkpoint_at": task.checkpoint_at.isoformat() if task.checkpoint_at else None,
    }


def report_ready(store: WorkflowStore, workflow: StoredWorkflow, task_name: str) -> datetime:
    """Record that the task is ready to stop; when (its first "ready" counts). 409 when its
    group has no notice, or the task no longer runs."""
    group, task = task_of(workflow, task_name)
    if group.notice_deadline is None:
        raise ConflictError(
            f"Task {task_name} of {workflow.workflow_id} has no notice of a stop: nothing "
            "waits for it to be ready. Report checkpoints instead (POST .../checkpoint)."
        )
    at = store.record_ready(workflow.workflow_id, task.uuid)
    if at is None:
        raise ConflictError(
            f"Task {task_name} of {workflow.workflow_id} is no longer running: it stopped already."
        )
    return at


def report_checkpoint(
    store: WorkflowStore,
    workflow: StoredWorkflow,
    task_name: str,
    checkpoint: Checkpoint,
    now: datetime,
) -> StoredTask:
    """Record ``checkpoint`` for the running task ``task_name`` of ``workflow`` (whose caller
    was checked); the task as it was. 404 for an unknown task; 400 for a checkpoint in the
    future or before the task started, or a task that is not running."""
    task = next((t for group in workflow.groups for t in group.tasks if t.name == task_name), None)
    if task is None:
        raise NotFoundError(f"Task {task_name} not found in workflow {workflow.workflow_id}.")
    refusal = checkpoint_refusal(checkpoint.at, task.started_at, now)
    if refusal is not None:
        raise UserError(f"Field 'at' ({checkpoint.at.isoformat()}) {refusal}.")
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
