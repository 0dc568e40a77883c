"""The dashboard at ``/ui``: pages drawn on the server from the same services as the REST API,
with the same authorization (docs/dashboard.md).

Each page asks the authorizer what the REST endpoint it mirrors asks: a pool the caller may not
use is not shown, a workflow of a pool it may not read answers 403, and a rollback needs
``config:Update`` like ``POST /api/configs/history/rollback`` (``config_pages.py``). Drawing
a page is ``drawing.py``; the checks every route shares are ``page_context.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response

from corral.api.deps import AuthorizerDep, ConfigsDep, ListingsDep, RuntimeDep, WorkflowsDep
from corral.domain.views.explain import explain_workflow
from corral.domain.views.start_forecast import forecast_text
from corral.domain.workflows.record import attempt_of
from corral.domain.workflows.statuses import ALIVE, QUEUED, TaskStatus, WorkflowStatus
from corral.errors import NotFoundError, UserError
from corral.services.capacity import cluster_of
from corral.services.capacity_model import pool_capacity
from corral.services.commands import request_cancel
from corral.services.placement_now import GroupPlacement
from corral.services.runtime import utc_now
from corral.services.workflow_names import workflow_forecasts
from corral.web.dag import dag_svg
from corral.web.page_context import PageContextDep
from corral.web.topology_data import ghost_of, owner_names, pool_picture
from corral.web.topology_view import UNLABELLED, Level

STATIC = Path(__file__).parent / "static"
STATIC_TYPES = {
    ".svg": "image/svg+xml",
    ".js": "text/javascript",
    ".css": "text/css",
    ".txt": "text/plain",
}
PAGE_SIZE = 50
#: The failures and waiting workflows the overview lists.
OVERVIEW_ROWS = 5
#: The last page a list may ask for (its offset stays a 32-bit integer in every database).
MAX_PAGE = 1_000_000
#: How far back the overview counts finished workflows.
RECENT = timedelta(hours=24)
PRIORITY_ORDER = {"HIGH": 0, "NORMAL": 1, "LOW": 2}
#: The most bytes of a task's log a page shows (the tail).
LOG_TAIL_BYTES = 64 * 1024
STATUS_TABS = {
    "running": (WorkflowStatus.RUNNING,),
    "waiting": QUEUED,
    "failed": None,  # every FAILED_* status
    "completed": (WorkflowStatus.COMPLETED,),
}


router = APIRouter(prefix="/ui", include_in_schema=False)


@router.get("/static/{name}")
def static(name: str) -> Response:
    found = STATIC / name
    if "/" in name or name.startswith(".") or not found.is_file():
        raise NotFoundError(f"No static file {name}.")
    kind = STATIC_TYPES.get(found.suffix, "application/octet-stream")
    return Response(
        found.read_bytes(),
        media_type=kind,
        headers={"Cache-Control": "public, max-age=3600"},
    )


@router.get("/topology", response_class=HTMLResponse)
def topology(
    authorizer: AuthorizerDep,
    configs: ConfigsDep,
    context: PageContextDep,
    runtime: RuntimeDep,
    listings: ListingsDep,
    request: Request,
    pool: str | None = None,
    domain: str | None = None,
    ghost: str | None = None,
) -> HTMLResponse:
    principal = context.caller(request)
    authorizer.check(principal, "resources:Read")
    names = context.usable_pools(principal)
    if pool is not None and pool not in names:
        raise NotFoundError(f"Pool {pool} does not exist, or you may not use it.")
    chosen = pool or next(iter(names), None)
    if chosen is None:
        return context.render(request, "topology.html", chosen=None, pools=names, topic="workflows")
    state = configs.state()
    cluster = cluster_of(runtime.capacity(state), chosen)
    within = _domain(domain)
    levels = tuple(Level(key.key, key.label) for key in state.pool(chosen).topology_keys)
    queued = listings.list(pools=[chosen], statuses=QUEUED, limit=PAGE_SIZE)
    ghost_workflow = context.readable(principal, ghost) if ghost else None
    drawn = pool_picture(state, cluster, chosen, levels, within)
    capacity = low = None
    if cluster is not None:
        capacity = pool_capacity(state, cluster, chosen)
        low = pool_capacity(state, cluster, chosen, priority="LOW")
    return context.render(
        request,
        "topology.html",
        owner=owner_names(authorizer.workflow_namer(principal), cluster),
        topic="workflows",
        pools=names,
        chosen=chosen,
        levels=levels,
        within=within,
        picture=drawn,
        capacity=capacity,
        low=low,
        queued=queued,
        ghost=ghost_workflow,
        query=lambda **changes: _query({"pool": chosen, "domain": domain, "ghost": ghost}, changes),
    )


@router.get("/topology/ghost", response_class=HTMLResponse)
def topology_ghost(
    authorizer: AuthorizerDep,
    configs: ConfigsDep,
    context: PageContextDep,
    runtime: RuntimeDep,
    request: Request,
    pool: str,
    ghost: str,
) -> HTMLResponse:
    """Where a waiting workflow's group would land now: the topology page fetches this
    after it is drawn (placing a group on 5,000 nodes takes longer than drawing them)."""
    principal = context.caller(request)
    authorizer.check(principal, "resources:Read")
    if pool not in context.usable_pools(principal):
        raise NotFoundError(f"Pool {pool} does not exist, or you may not use it.")
    workflow = context.readable(principal, ghost)
    state = configs.state()
    cluster = cluster_of(runtime.capacity(state), pool)
    if cluster is None or workflow.pool != pool:
        placement = GroupPlacement("", reason=f"{ghost} does not run in pool {pool}")
    else:
        placement = ghost_of(state, workflow, cluster)
    keys = state.pool(pool).topology_keys
    landed = [cluster.node(name) for name in placement.nodes.values()] if cluster else []
    domains = sorted(
        {
            node.labels.get(keys[-1].label, UNLABELLED) if keys else UNLABELLED
            for node in landed
            if node is not None
        }
    )
    return context.render(
        request,
        "ghost.html",
        ghost=workflow,
        placement=placement,
        nodes=sorted(set(placement.nodes.values())),
        domains=domains,
        hide="/ui/topology?" + _query({"pool": pool}, {}),
    )


@router.get("/workflows", response_class=HTMLResponse)
def workflows(
    authorizer: AuthorizerDep,
    context: PageContextDep,
    listings: ListingsDep,
    request: Request,
    status: str = "",
    pool: str = "",
    user: str = "",
    page: Annotated[int, Query(ge=0, le=MAX_PAGE)] = 0,
) -> HTMLResponse:
    principal = context.caller(request)
    authorizer.check(principal, "workflow:List")
    readable_names = context.readable_pools(principal)
    statuses = _statuses(status)
    rows = listings.list(
        users=[user] if user else None,
        pools=[pool] if pool else None,
        statuses=statuses,
        limit=PAGE_SIZE + 1,
        offset=page * PAGE_SIZE,
        visible_to=(principal.username, readable_names),
    )
    positions = _queue_positions(listings.queued(sorted({r["pool"] for r in rows})))
    filters = {"status": status, "pool": pool, "user": user}
    return context.render(
        request,
        "workflows.html",
        topic="workflows",
        rows=rows[:PAGE_SIZE],
        more=len(rows) > PAGE_SIZE,
        page=page,
        positions=positions,
        filters=filters,
        tabs=list(STATUS_TABS),
        pools=sorted({*readable_names, *(row["pool"] for row in rows)}),
        now=utc_now(),
        query=lambda **changes: _query(filters, changes),
    )


@router.get("/workflows/{workflow_id}", response_class=HTMLResponse)
def workflow(
    authorizer: AuthorizerDep,
    configs: ConfigsDep,
    context: PageContextDep,
    runtime: RuntimeDep,
    listings: ListingsDep,
    request: Request,
    workflow_id: str,
    task: str = "",
    retry: Annotated[int | None, Query(ge=0, le=MAX_PAGE)] = None,
) -> HTMLResponse:
    principal = context.caller(request)
    found = context.readable(principal, workflow_id)
    pool = configs.state().find_pool(found.pool)
    forecasts = workflow_forecasts(
        runtime.forecasts, listings, workflow_id, authorizer.workflow_namer(principal)
    )
    explained = explain_workflow(
        found,
        utc_now(),
        pool_in_maintenance=pool is not None and pool.enable_maintenance,
        forecasts=forecasts,
        stops=listings.stop_costs(workflow_id),
    )
    waiting = [
        g.uuid for g in found.groups if g.status == TaskStatus.SCHEDULING and g.uuid in forecasts
    ]
    tasks = [t for group in found.groups for t in group.tasks]
    shown = next((t for t in tasks if t.name == task), tasks[0] if tasks else None)
    current = shown is not None and retry in (None, shown.retry_id)
    if shown is not None:
        shown = attempt_of(shown, retry)
    log = ""
    if shown is not None and shown.started_at is not None:
        log = runtime.task_logs(found, shown)[-LOG_TAIL_BYTES:]
    manifests = {group.uuid: group.manifests or [] for group in found.groups}
    may_cancel = found.status in ALIVE and (
        principal.username == found.submitted_by
        or authorizer.allows(principal, "workflow:Cancel", f"pool/{found.pool}")
    )
    position = None
    if found.status in QUEUED:
        position = _queue_positions(listings.queued([found.pool])).get(found.workflow_id)
    return context.render(
        request,
        "workflow.html",
        topic=f"workflow:{workflow_id}",
        workflow=found,
        explained=explained,
        dag=dag_svg(found),
        shown=shown,
        log=log,
        manifests=manifests,
        may_cancel=may_cancel,
        live_log=found.status in ALIVE and current,
        position=position,
        eta=forecast_text(forecasts[waiting[0]], utc_now()) if waiting else None,
    )


@router.get("/workflows/{workflow_id}/log", response_class=PlainTextResponse)
def workflow_log(
    context: PageContextDep, runtime: RuntimeDep, request: Request, workflow_id: str, task: str
) -> PlainTextResponse:
    found = context.readable(context.caller(request), workflow_id)
    for candidate in (t for group in found.groups for t in group.tasks):
        if candidate.name == task:
            text = runtime.task_logs(found, candidate) if candidate.started_at else ""
            return PlainTextResponse(text[-LOG_TAIL_BYTES:])
    raise NotFoundError(f"Workflow {workflow_id} has no task {task}.")


@router.post("/workflows/{workflow_id}/cancel", response_class=HTMLResponse)
def cancel(
    authorizer: AuthorizerDep,
    context: PageContextDep,
    store: WorkflowsDep,
    request: Request,
    workflow_id: str,
) -> HTMLResponse:
    request_cancel(store, authorizer, context.caller(request), workflow_id)
    return context.render(
        request,
        "notice.html",
        message=f"Cancel requested for {workflow_id}; its tasks are being stopped.",
    )


def _domain(text: str | None) -> tuple[str, str] | None:
    if not text:
        return None
    label, sep, value = text.partition("=")
    if not sep:
        raise UserError(f"domain={text!r}: give it as LABEL=VALUE, e.g. nvidia.com/gpu-clique=a.")
    return label, value


def _statuses(tab: str) -> list[str] | None:
    if not tab:
        return None
    if tab not in STATUS_TABS:
        raise UserError(f"status={tab!r}: choose one of {', '.join(STATUS_TABS)}.")
    chosen = STATUS_TABS[tab]
    if chosen is None:
        return [status.value for status in WorkflowStatus if status.failed]
    return list(chosen)


def _queue_positions(queued: Sequence[tuple[str, str, str, datetime]]) -> dict[str, int]:
    """Each waiting workflow's place in its pool's queue: by priority, then age (the order the
    scheduler offers them in, before fair share and fit)."""
    ordered = sorted(queued, key=lambda row: (row[1], PRIORITY_ORDER.get(row[2], 1), row[3]))
    positions: dict[str, int] = {}
    counters: dict[str, int] = {}
    for workflow_id, pool, _, _ in ordered:
        counters[pool] = counters.get(pool, 0) + 1
        positions[workflow_id] = counters[pool]
    return positions


def _query(current: Mapping[str, Any], changes: Mapping[str, Any]) -> str:
    merged = {**current, **changes}
    return urlencode({key: value for key, value in merged.items() if value not in (None, "")})
