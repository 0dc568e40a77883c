"""``POST /api/pool/{pool}/workflow`` (submit, dry run, validate) and ``/api/workflow`` views."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from corral.api.auth import Authorizer, Principal
from corral.api.config_routes import Caller
from corral.domain.workflow_plan import PlannedGroup
from corral.services.submission import (
    Mode,
    SubmissionService,
    SubmitOutcome,
    SubmitRequest,
    SubmittingUser,
)
from corral.store.workflows import StoredGroup, StoredWorkflow, WorkflowStore

VALIDATED = "Workflow validation succeeded."


class TemplateSpec(BaseModel):
    """OSMO's submit body: the file and the ``--set`` / ``--set-string`` values."""

    model_config = ConfigDict(extra="forbid")

    file: str = Field(max_length=1_000_000)
    set_variables: list[str] = []
    set_string_variables: list[str] = []
    uploaded_templated_spec: str | None = None
    source: str = Field(default="workflow.yaml", max_length=256)


def build_workflow_router(
    submissions: SubmissionService, store: WorkflowStore, authorizer: Authorizer
) -> APIRouter:
    router = APIRouter(tags=["workflows"])

    def submitter(caller: Principal) -> SubmittingUser:
        return SubmittingUser(
            username=caller.username,
            is_admin=authorizer.is_admin(caller),
            require=lambda action, resource: authorizer.check(caller, action, resource),
        )

    @router.post("/api/pool/{pool}/workflow")
    def submit(
        caller: Caller,
        pool: str,
        body: TemplateSpec,
        dry_run: bool = False,
        validation_only: bool = False,
        priority: str = "NORMAL",
    ) -> dict[str, Any]:
        """Submit a workflow; ``dry_run`` returns every object it would create, per group,
        in creation order; ``validation_only`` runs every check. Neither stores anything."""
        mode = Mode.DRY_RUN if dry_run else Mode.VALIDATE if validation_only else Mode.SUBMIT
        request = SubmitRequest(
            pool=pool,
            file=body.file,
            set_values=tuple(body.set_variables),
            set_strings=tuple(body.set_string_variables),
            priority=priority,
            source=body.source,
        )
        outcome = submissions.submit(submitter(caller), request, mode)
        if mode is Mode.DRY_RUN:
            return _dry_run(outcome)
        if mode is Mode.VALIDATE:
            return {"name": outcome.workflow_id, "logs": VALIDATED, "warnings": []}
        return {
            "name": outcome.workflow_id,
            "overview": f"/api/workflow/{outcome.workflow_id}",
            "logs": "",
            "dashboard_url": "",
            "warnings": [],
        }

    @router.get("/api/workflow")
    def list_workflows(
        caller: Caller, all_users: bool = False, pool: str | None = None, limit: int = 100
    ) -> dict[str, Any]:
        """The caller's workflows, newest first (``all_users=true``: everyone's)."""
        authorizer.check(caller, "workflow:List")
        rows = store.list(
            users=None if all_users else [caller.username],
            pools=[pool] if pool else None,
            limit=max(1, min(limit, 1000)),
        )
        return {
            "workflows": [{**row, "submitted_at": row["submitted_at"].isoformat()} for row in rows]
        }

    @router.get("/api/workflow/{workflow_id}")
    def query(caller: Caller, workflow_id: str, verbose: bool = False) -> dict[str, Any]:
        """A workflow, its groups and tasks; ``verbose=true`` adds each group's manifests."""
        workflow = store.get(workflow_id)
        authorizer.check(caller, "workflow:Read", f"pool/{workflow.pool}")
        return _workflow_view(workflow, verbose=verbose)

    return router


def _dry_run(outcome: SubmitOutcome) -> dict[str, Any]:
    plan = outcome.plan
    return {
        "name": outcome.workflow_id,
        "spec": outcome.spec,
        "pool": plan.submitter.pool,
        "namespace": plan.namespace,
        "priority": plan.submitter.priority,
        "exec_timeout_s": plan.exec_timeout.total_seconds(),
        "queue_timeout_s": plan.queue_timeout.total_seconds(),
        "groups": [_planned_group(group) for group in plan.groups],
    }


def _planned_group(group: PlannedGroup) -> dict[str, Any]:
    return {
        "name": group.name,
        "uuid": group.uuid,
        "upstream": list(group.upstream),
        "tasks": [
            {
                "name": t.name,
                "uuid": t.uuid,
                "pod_name": t.pod_name,
                "platform": t.platform,
                "lead": t.lead,
            }
            for t in group.tasks
        ],
        "manifests": list(group.manifests),
    }


def _workflow_view(workflow: StoredWorkflow, *, verbose: bool) -> dict[str, Any]:
    return {
        "name": workflow.workflow_id,
        "uuid": workflow.uuid,
        "pool": workflow.pool,
        "backend": workflow.backend,
        "namespace": workflow.namespace,
        "status": workflow.status,
        "priority": workflow.priority,
        "submitted_by": workflow.submitted_by,
        "submitted_at": workflow.submitted_at.isoformat(),
        "exec_timeout_s": workflow.exec_timeout_s,
        "queue_timeout_s": workflow.queue_timeout_s,
        "spec": workflow.spec,
        "groups": [_stored_group(group, verbose=verbose) for group in workflow.groups],
    }


def _stored_group(group: StoredGroup, *, verbose: bool) -> dict[str, Any]:
    view: dict[str, Any] = {
        "name": group.name,
        "uuid": group.uuid,
        "status": group.status,
        "upstream": group.upstream,
        "resource_kinds": group.resource_kinds,
        "tasks": [
            {
                "name": t.name,
                "uuid": t.uuid,
                "pod_name": t.pod_name,
                "platform": t.platform,
                "lead": t.lead,
                "status": t.status,
                "retry_id": t.retry_id,
            }
            for t in group.tasks
        ],
    }
    if verbose:
        view["manifests"] = group.manifests
    return view
