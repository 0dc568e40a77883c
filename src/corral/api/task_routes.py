"""A task's side of a stop (docs/checkpoints.md), for the task itself (its own token), the
workflow's owner or an admin:
``POST .../task/{task}/checkpoint`` (a committed checkpoint), ``GET .../task/{task}/notice``
(the notice of a coming stop) and ``POST .../task/{task}/ready`` (ready to stop)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import Field

from corral.api import task_responses as R
from corral.api.auth import Authorizer, Principal
from corral.api.deps import AuthorizerDep, Caller, WorkflowsDep
from corral.api.schemas import WHOLE, IsoTime, ShownText, StrictBody
from corral.domain.workflows.record import StoredWorkflow
from corral.services.checkpoints import (
    Checkpoint,
    notice_view,
    own_task_workflow,
    owned_workflow,
    report_checkpoint,
    report_ready,
)
from corral.services.runtime import utc_now

router = APIRouter(tags=["tasks"])


class CheckpointReport(StrictBody):
    """When the checkpoint was committed (default: now), at which step, and what it holds."""

    at: IsoTime | None = None
    #: Within what a JSON number holds exactly (2^53).
    step: Annotated[int, Field(ge=0, le=2**53), WHOLE] | None = None
    description: Annotated[ShownText, Field(max_length=1000)] | None = None


@router.post(
    "/api/workflow/{workflow_id}/task/{task_name}/checkpoint", response_model=R.CheckpointRecorded
)
def checkpoint(
    authorizer: AuthorizerDep,
    store: WorkflowsDep,
    caller: Caller,
    workflow_id: str,
    task_name: str,
    report: CheckpointReport | None = None,
) -> dict[str, Any]:
    """Record that a running task committed a checkpoint: preemption then counts the work the
    task's group would lose from it. The workflow's owner or an admin (404 to anyone else);
    400 for a time in the future or a task that is not running."""
    workflow = _owned(authorizer, store, caller, workflow_id, task_name)
    report = report or CheckpointReport()
    now = utc_now()
    at = report.at or now  # a time without a zone is UTC, as every time corral gives
    found = Checkpoint(at, report.step, report.description)
    report_checkpoint(store, workflow, task_name, found, now)
    return {
        "workflow_id": workflow_id,
        "task": task_name,
        "at": at.isoformat(),
        "step": report.step,
        "description": report.description,
    }


@router.get("/api/workflow/{workflow_id}/task/{task_name}/notice", response_model=R.TaskNotice)
def notice(
    authorizer: AuthorizerDep,
    store: WorkflowsDep,
    caller: Caller,
    workflow_id: str,
    task_name: str,
) -> dict[str, Any]:
    """The notice of the task's coming stop (``notice`` null while there is none): when it
    was given, its deadline, the seconds left and why; and whether the task said it was ready.
    A task polls it (docs/checkpoints.md#the-notice). The workflow's owner or an admin."""
    workflow = _owned(authorizer, store, caller, workflow_id, task_name)
    return notice_view(workflow, task_name, utc_now())


@router.post("/api/workflow/{workflow_id}/task/{task_name}/ready", response_model=R.TaskReady)
def ready(
    authorizer: AuthorizerDep,
    store: WorkflowsDep,
    caller: Caller,
    workflow_id: str,
    task_name: str,
) -> dict[str, Any]:
    """After a notice: the task is ready to stop (its checkpoint is safe). The gang stops once
    every task is ready, before the deadline. 409 without a notice, or once the task stopped.
    The workflow's owner or an admin."""
    workflow = _owned(authorizer, store, caller, workflow_id, task_name)
    at = report_ready(store, workflow, task_name)
    return {"workflow_id": workflow_id, "task": task_name, "ready_at": at.isoformat()}


def _owned(
    authorizer: Authorizer, store: Any, caller: Principal, workflow_id: str, task_name: str
) -> StoredWorkflow:
    if caller.task is not None:
        return own_task_workflow(store, caller.task, workflow_id, task_name)
    return owned_workflow(store, caller.username, authorizer.is_admin(caller), workflow_id)
