"""Who may see and cancel a workflow: one answer for the REST API, the dashboard and its live
stream (docs/access.md#workflows-you-may-not-read).

A workflow in a pool the caller may not ``workflow:Read`` is answered exactly as one that does
not exist, 404 with the same words, as GitHub does for a private repository: otherwise the
status code tells anyone who may call the API which workflow names exist in other pools.
"""

from __future__ import annotations

from corral.api.auth import Authorizer, Principal
from corral.errors import ConflictError, NotFoundError
from corral.store.workflow_listings import ALIVE
from corral.store.workflow_records import StoredWorkflow
from corral.store.workflows import WorkflowStore


def missing(workflow_id: str) -> NotFoundError:
    return NotFoundError(f"Workflow {workflow_id} not found.")


def may_read(authorizer: Authorizer, caller: Principal, workflow: StoredWorkflow) -> bool:
    return authorizer.allows(caller, "workflow:Read", f"pool/{workflow.pool}")


def read_workflow(
    store: WorkflowStore, authorizer: Authorizer, caller: Principal, workflow_id: str
) -> StoredWorkflow:
    """The workflow, if it exists and the caller may ``workflow:Read`` on its pool; else 404."""
    workflow = store.get(workflow_id)
    if not may_read(authorizer, caller, workflow):
        raise missing(workflow_id)
    return workflow


def request_cancel(
    store: WorkflowStore, authorizer: Authorizer, caller: Principal, workflow_id: str
) -> None:
    """Ask the controller to cancel: the submitter may, or whoever may ``workflow:Cancel`` on
    the workflow's pool (403; 404 to who may not even read it); 409 once finished or already
    canceling."""
    workflow = store.get(workflow_id)
    if caller.username != workflow.submitted_by:
        if not may_read(authorizer, caller, workflow):
            raise missing(workflow_id)
        authorizer.check(caller, "workflow:Cancel", f"pool/{workflow.pool}")
    if not store.request_cancel(workflow_id, caller.username):
        raise ConflictError(_not_cancelable(store.get(workflow_id)))


def _not_cancelable(workflow: StoredWorkflow) -> str:
    if workflow.status in ALIVE:
        return (
            f"Workflow {workflow.workflow_id} is already being canceled "
            f"(requested by {workflow.cancel_requested_by})."
        )
    return (
        f"Workflow {workflow.workflow_id} already finished ({workflow.status}); "
        "there is nothing to cancel."
    )
