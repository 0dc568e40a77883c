"""``POST /api/pool/{pool}/workflow`` (submit, dry run, validate) and ``/api/workflow`` views:
query, cancel, logs and explain."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import PlainTextResponse
from pydantic import Field, StrictBool, StringConstraints
from starlette.concurrency import run_in_threadpool

from corral.api import responses as R
from corral.api.auth import Authorizer, Principal
from corral.api.deps import (
    AuthorizerDep,
    Caller,
    ConfigsDep,
    ForecastsDep,
    ListingsDep,
    SubmissionsDep,
    TaskLogs,
    TaskLogsDep,
    WorkflowsDep,
)
from corral.api.responses import LEAN
from corral.api.schemas import ShownText, StoredText, StrictBody
from corral.api.workflow_views import dashboard_page, logs_url, workflow_row, workflow_view
from corral.domain.views.explain import explain_workflow
from corral.domain.workflows.plan import PlannedGroup
from corral.domain.workflows.record import StoredTask, StoredWorkflow, attempt_of
from corral.domain.workflows.spec import TaskFileContents
from corral.domain.workflows.statuses import WorkflowStatus
from corral.errors import NotFoundError, UserError
from corral.services.commands import read_workflow, request_cancel
from corral.services.placement_now import GroupPlacement
from corral.services.runtime import utc_now
from corral.services.submission import (
    Mode,
    SubmitOutcome,
    SubmitRequest,
    SubmittingUser,
)
from corral.services.workflow_names import workflow_forecasts

VALIDATED = "Workflow validation succeeded."
#: Set on a submission's answer when its Idempotency-Key was used before: nothing new was made.
REPLAYED_HEADER = "Idempotent-Replayed"

IdempotencyKeyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        json_schema_extra={"pattern": "^[!-~]{1,256}$"},  # checked with its own message
        description="A key the client makes for one submission (a UUID) and sends again with "
        "every retry of it: a retry answers the workflow the first one made.",
    ),
]

#: OSMO's workflow labels, which corral does not keep: declared empty, refused with a message.
NoLabels = Annotated[
    list[str], Query(json_schema_extra={"maxItems": 0}, description="Not kept by corral: refused.")
]
#: Past any number of workflows a database holds, and within what it can compare.
OFFSET_MAX = 2**31 - 1
#: Names a list is narrowed to: no character a database cannot store (a NUL) reaches a query.
Names = Annotated[list[Annotated[str, StringConstraints(pattern=r"^[^\x00]{1,256}$")]], Query()]


class LocalFile(StrictBody):
    """A file the CLI read for ``files[].localpath``: text, or base64 for binary."""

    contents: StoredText
    base64: StrictBool = False


class TemplateSpec(StrictBody):
    """OSMO's submit body: the file and the ``--set`` / ``--set-string`` values; corral's CLI
    adds the files named by ``files[].localpath``."""

    file: StoredText = Field(max_length=1_000_000)
    set_variables: list[StoredText] = Field(default_factory=list)
    set_string_variables: list[StoredText] = Field(default_factory=list)
    uploaded_templated_spec: StoredText | None = None
    source: StoredText = Field(default="workflow.yaml", max_length=256)
    local_files: dict[StoredText, LocalFile] = Field(default_factory=dict, max_length=1000)


router = APIRouter(tags=["workflows"])


def submitter(authorizer: Authorizer, caller: Principal) -> SubmittingUser:
    return SubmittingUser(
        username=caller.username,
        is_admin=authorizer.is_admin(caller),
        require=lambda action, resource: authorizer.check(caller, action, resource),
    )


@router.post("/api/pool/{pool}/workflow", response_model=R.SubmitAnswer, **LEAN)
async def submit(
    authorizer: AuthorizerDep,
    submissions: SubmissionsDep,
    caller: Caller,
    pool: str,
    body: TemplateSpec,
    response: Response,
    http: Request,
    idempotency_key: IdempotencyKeyHeader = None,
    dry_run: bool = False,
    validation_only: bool = False,
    priority: str = "NORMAL",
    label: NoLabels = [],  # noqa: B006 - FastAPI query list
) -> dict[str, Any]:
    """Submit a workflow; ``dry_run`` returns every object it would create, per group,
    in creation order; ``validation_only`` runs every check. Neither stores anything.
    A retry with the first try's ``Idempotency-Key`` answers the first try's workflow.

    Async, with the blocking work in one worker thread: the body, the caller and the
    answer are handled on the event loop instead of a thread trip each."""
    refuse_labels(label, "label")
    mode = Mode.DRY_RUN if dry_run else Mode.VALIDATE if validation_only else Mode.SUBMIT
    request = SubmitRequest(
        pool=pool,
        file=body.file,
        set_values=tuple(body.set_variables),
        set_strings=tuple(body.set_string_variables),
        priority=priority,
        source=body.source,
        local_files={
            path: TaskFileContents(found.contents, found.base64)
            for path, found in body.local_files.items()
        },
    )
    outcome = await run_in_threadpool(
        submissions.submit, submitter(authorizer, caller), request, mode, idempotency_key
    )
    return _submitted(outcome, mode, response, http)


@router.post(
    "/api/pool/{pool}/workflow/{workflow_id}/restart",
    response_model=R.SubmitAnswer,
    **LEAN,
)
def restart(
    authorizer: AuthorizerDep,
    submissions: SubmissionsDep,
    caller: Caller,
    pool: str,
    workflow_id: str,
    response: Response,
    http: Request,
    idempotency_key: IdempotencyKeyHeader = None,
    dry_run: bool = False,
    validation_only: bool = False,
) -> dict[str, Any]:
    """A new workflow that re-runs the failed and unfinished groups of ``workflow_id`` in
    ``pool``; inputs from its completed groups are read from ``workflow_id``."""
    mode = Mode.DRY_RUN if dry_run else Mode.VALIDATE if validation_only else Mode.SUBMIT
    outcome = submissions.restart(
        submitter(authorizer, caller), workflow_id, pool, mode, idempotency_key
    )
    return {**_submitted(outcome, mode, response, http), "restarted_from": workflow_id}


@router.get("/api/workflow", response_model=R.WorkflowList)
def list_workflows(
    authorizer: AuthorizerDep,
    listings: ListingsDep,
    caller: Caller,
    http: Request,
    users: Names = [],  # noqa: B006 - FastAPI query list
    all_users: bool = False,
    pools: Names = [],  # noqa: B006
    all_pools: bool = False,
    statuses: Annotated[list[WorkflowStatus], Query()] = [],  # noqa: B006
    name: Annotated[str | None, Query(pattern=r"^[^\x00]{0,256}$")] = None,
    order: Annotated[str, Query(pattern="^(?i:asc|desc)$")] = "DESC",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=OFFSET_MAX)] = 0,
    label: NoLabels = [],  # noqa: B006
    no_label: NoLabels = [],  # noqa: B006
) -> dict[str, Any]:
    """Workflows, newest first (OSMO's ``workflow list``): the caller's own, or
    ``users``' or everyone's (``all_users=true``) in the pools the caller may
    ``workflow:Read``; ``pools`` narrows them (``all_pools=true``: no narrowing)."""
    authorizer.check(caller, "workflow:List")
    refuse_labels(label, "label")
    refuse_labels(no_label, "no_label")
    readable = [
        found
        for found in listings.pools()
        if authorizer.allows(caller, "workflow:Read", f"pool/{found}")
    ]
    rows = listings.list(
        users=None if all_users else (users or [caller.username]),
        pools=pools if pools and not all_pools else None,
        statuses=[str(found) for found in statuses] or None,
        name_contains=name,
        oldest_first=order.upper() == "ASC",
        limit=limit + 1,
        offset=offset,
        visible_to=(caller.username, readable),
    )
    base, now = str(http.base_url), utc_now()
    return {
        "workflows": [workflow_row(row, base, now) for row in rows[:limit]],
        "more_entries": len(rows) > limit,
    }


@router.get("/api/workflow/{workflow_id}", response_model=R.WorkflowView, **LEAN)
def query(
    authorizer: AuthorizerDep,
    store: WorkflowsDep,
    listings: ListingsDep,
    forecasts: ForecastsDep,
    caller: Caller,
    http: Request,
    workflow_id: str,
    verbose: bool = False,
) -> dict[str, Any]:
    """A workflow, its groups and tasks; ``verbose=true`` adds each group's manifests."""
    found = readable(authorizer, store, caller, workflow_id)
    return workflow_view(
        found,
        str(http.base_url),
        utc_now(),
        verbose=verbose,
        forecasts=workflow_forecasts(
            forecasts, listings, found.workflow_id, authorizer.workflow_namer(caller)
        ),
    )


@router.post("/api/workflow/{workflow_id}/cancel", response_model=R.Canceled)
def cancel(
    authorizer: AuthorizerDep,
    store: WorkflowsDep,
    caller: Caller,
    workflow_id: str,
    message: Annotated[ShownText | None, Query(max_length=1000)] = None,
    force: bool = False,
) -> dict[str, Any]:
    """Ask the lifecycle controller to cancel: the submitter, or whoever may
    ``workflow:Cancel`` on the workflow's pool. 409 once finished or already canceling.
    ``message`` says why (every task ends with it); ``force`` (OSMO's CLI sends it) changes
    nothing: corral always stops every pod of the workflow."""
    del force
    request_cancel(store, authorizer, caller, workflow_id, message)
    return {
        "name": workflow_id,
        "message": f"Cancel requested for workflow {workflow_id}; its tasks will be "
        "stopped and it will end FAILED_CANCELED.",
    }


@router.get("/api/workflow/{workflow_id}/logs", response_class=PlainTextResponse)
def logs(
    authorizer: AuthorizerDep,
    store: WorkflowsDep,
    task_logs: TaskLogsDep,
    caller: Caller,
    workflow_id: str,
    task_name: Annotated[str | None, Query(max_length=256)] = None,
    last_n_lines: Annotated[int | None, Query(ge=1)] = None,
    retry_id: Annotated[int | None, Query(ge=0, le=OFFSET_MAX)] = None,
) -> PlainTextResponse:
    """One task's latest attempt's log as text (OSMO's ``task_name``), or with ``retry_id``
    that attempt's; without a task, every task's latest, each under a ``==> <task> (retry N)
    <==`` header. ``last_n_lines`` keeps the end of each log."""
    workflow = readable(authorizer, store, caller, workflow_id)
    tasks = [t for group in workflow.groups for t in group.tasks]

    def log_of(task: StoredTask) -> str:
        return last_lines(_task_log(workflow, task, task_logs), last_n_lines)

    if task_name is None:
        if retry_id is not None:
            raise UserError("retry_id: name the task too (task_name): retries are per task.")
        sections = [f"==> {t.name} (retry {t.retry_id}) <==\n{log_of(t)}" for t in tasks]
        return PlainTextResponse("\n".join(sections))
    for candidate in tasks:
        if candidate.name == task_name:
            return PlainTextResponse(log_of(attempt_of(candidate, retry_id)))
    raise NotFoundError(
        f"Workflow {workflow_id} has no task {task_name}. Its tasks: "
        f"{', '.join(t.name for t in tasks)}."
    )


@router.get("/api/workflow/{workflow_id}/explain", response_model=R.Explained)
def explain(
    authorizer: AuthorizerDep,
    configs: ConfigsDep,
    store: WorkflowsDep,
    listings: ListingsDep,
    forecasts: ForecastsDep,
    caller: Caller,
    workflow_id: str,
) -> dict[str, Any]:
    """Per group: its status and, in one line, why it is there (and, while it waits, its
    start-time forecast)."""
    workflow = readable(authorizer, store, caller, workflow_id)
    pool = configs.state().find_pool(workflow.pool)
    found = explain_workflow(
        workflow,
        utc_now(),
        pool_in_maintenance=pool is not None and pool.enable_maintenance,
        forecasts=workflow_forecasts(
            forecasts, listings, workflow.workflow_id, authorizer.workflow_namer(caller)
        ),
        stops=listings.stop_costs(workflow.workflow_id),
    )
    return {
        "workflow_id": found.workflow_id,
        "status": found.status,
        "summary": found.summary,
        "groups": [
            {"name": g.name, "status": g.status, "reason": g.reason, "details": list(g.details)}
            for g in found.groups
        ],
    }


def readable(
    authorizer: Authorizer, store: WorkflowsDep, caller: Principal, workflow_id: str
) -> StoredWorkflow:
    return read_workflow(store, authorizer, caller, workflow_id)


def _submitted(
    outcome: SubmitOutcome, mode: Mode, response: Response, request: Request
) -> dict[str, Any]:
    """OSMO's answer to a submission, a dry run (every object) or a validation."""
    if outcome.replayed:
        response.headers[REPLAYED_HEADER] = "true"
    if mode is Mode.DRY_RUN:
        return _dry_run(outcome)
    if mode is Mode.VALIDATE:
        return {"name": outcome.workflow_id, "logs": VALIDATED, "warnings": list(outcome.warnings)}
    return {
        "name": outcome.workflow_id,
        "overview": dashboard_page(str(request.base_url), outcome.workflow_id),
        "logs": logs_url(str(request.base_url), outcome.workflow_id),
        "dashboard_url": dashboard_page(str(request.base_url), outcome.workflow_id),
        "warnings": list(outcome.warnings),
    }


def refuse_labels(labels: list[str], parameter: str) -> None:
    """corral keeps no workflow labels: a submission or a list that names some is refused
    rather than answered as if it had none (docs/osmo-reference.md#wire-compatibility)."""
    if labels:
        raise UserError(
            "corral keeps no workflow labels; submit and list without --label "
            "(tell workflows apart by name and pool).",
            path=(parameter,),
        )


def last_lines(text: str, count: int | None) -> str:
    """The last ``count`` lines of ``text`` (all of it without a count)."""
    if count is None:
        return text
    lines = text.splitlines(keepends=True)
    return "".join(lines[-count:])


def _task_log(workflow: StoredWorkflow, task: StoredTask, task_logs: TaskLogs) -> str:
    """The task's log ending with a newline; a note line when it has not started."""
    if task.started_at is None:
        return f"corral: task {task.name} has not started ({task.status})\n"
    text = task_logs(workflow, task)
    return text if not text or text.endswith("\n") else text + "\n"


def _dry_run(outcome: SubmitOutcome) -> dict[str, Any]:
    plan = outcome.plan
    assert plan is not None  # a dry run always plans
    live = {found.group: found for found in outcome.placements}
    return {
        "name": outcome.workflow_id,
        "spec": outcome.spec,
        "pool": plan.submitter.pool,
        "namespace": plan.namespace,
        "priority": plan.submitter.priority,
        "exec_timeout_s": plan.exec_timeout.total_seconds(),
        "queue_timeout_s": plan.queue_timeout.total_seconds(),
        "groups": [_planned_group(group, live.get(group.name)) for group in plan.groups],
        **({"warnings": list(outcome.warnings)} if outcome.warnings else {}),
        **({"could_never_run": plan.could_never_run} if plan.could_never_run else {}),
    }


def _planned_group(group: PlannedGroup, live: GroupPlacement | None = None) -> dict[str, Any]:
    placement = None
    if live is not None:
        placement = {
            "verdict": live.verdict,
            "nodes": live.nodes,
            "domains": live.domains,
            "evicts": [dataclasses.asdict(e) for e in live.evicts],
            "reason": live.reason,
        }
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
        **({"placement": placement} if placement is not None else {}),
    }
