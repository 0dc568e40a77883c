"""``POST /api/workflow/{id}/task/{task}/checkpoint``: a task's committed checkpoint
(docs/checkpoints.md), reported by the workflow's owner or an admin for it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import Field

from corral.api import responses as R
from corral.api.deps import AuthorizerDep, Caller, WorkflowsDep
from corral.api.schemas import StrictBody
from corral.errors import NotFoundError
from corral.services.checkpoints import Checkpoint, report_checkpoint
from corral.services.runtime import utc_now

router = APIRouter(tags=["tasks"])


class CheckpointReport(StrictBody):
    """When the checkpoint was committed (default: now), at which step, and what it holds."""

    at: datetime | None = None
    #: Within what a JSON number holds exactly (2^53).
    step: Annotated[int, Field(ge=0, le=2**53)] | None = None
    description: Annotated[str, Field(max_length=1000)] | None = None


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
    workflow = store.get(workflow_id)
    if caller.username != workflow.submitted_by and not authorizer.is_admin(caller):
        raise NotFoundError(f"Workflow {workflow_id} not found.")
    report = report or CheckpointReport()
    now = utc_now()
    at = report.at or now
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)  # a time without a zone is UTC, as every time corral gives
    found = Checkpoint(at, report.step, report.description)
    report_checkpoint(store, workflow, task_name, found, now)
    return {
        "workflow_id": workflow_id,
        "task": task_name,
        "at": at.isoformat(),
        "step": report.step,
        "description": report.description,
    }
