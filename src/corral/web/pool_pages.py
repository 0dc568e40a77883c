"""The dashboard's pages about pools: the overview (counts, GPUs per pool, the controller) and
the pools page (quotas, free GPUs, what a pool renders). Both list a page of pools at a time
(``?offset=``, :mod:`corral.domain.views.paging`), worked out for that page only: at 5,000
pools the pools page took seven seconds to list them all."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from corral.api.auth import Authorizer, Principal
from corral.api.deps import AuthorizerDep, ConfigsDep, ListingsDep, RuntimeDep
from corral.domain.configs.references import NO_PLATFORM_FIX
from corral.domain.configs.snapshot import Configs
from corral.domain.views.paging import MAX_OFFSET, Page
from corral.domain.views.pool_quota import gpu_quota
from corral.domain.workflows.statuses import QUEUED, WorkflowStatus
from corral.errors import ForbiddenError, UserError
from corral.services.capacity import ClusterCapacity
from corral.services.capacity_model import pool_capacities
from corral.services.commands import rendered_pool
from corral.services.pool_usage import PoolUsage, pool_usage
from corral.services.runtime import Runtime, utc_now
from corral.web.page_context import PageContext, PageContextDep

#: The failures and waiting workflows the overview lists.
OVERVIEW_ROWS = 5
#: How far back the overview counts finished workflows.
RECENT = timedelta(hours=24)

Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET)]

router = APIRouter(prefix="/ui", include_in_schema=False)


@router.get("", response_class=HTMLResponse)
def overview(
    authorizer: AuthorizerDep,
    configs: ConfigsDep,
    context: PageContextDep,
    runtime: RuntimeDep,
    listings: ListingsDep,
    request: Request,
    offset: Offset = 0,
) -> HTMLResponse:
    principal = context.caller(request)
    authorizer.check(principal, "workflow:List")
    now = utc_now()
    readable_names = context.readable_pools(principal)
    visible = (principal.username, readable_names)
    counts = listings.status_counts(now - RECENT, visible_to=visible)
    state = configs.state()
    shown = _PoolsPage.of(context, principal, runtime, state, offset)
    return context.render(
        request,
        "overview.html",
        capacities=pool_capacities(state, shown.clusters, shown.names, "NORMAL"),
        topic="workflows",
        running=counts.get(WorkflowStatus.RUNNING, 0),
        waiting=sum(counts.get(status, 0) for status in QUEUED),
        failed=sum(n for status, n in counts.items() if WorkflowStatus(status).failed),
        completed=counts.get(WorkflowStatus.COMPLETED, 0),
        node_sets=shown.usage.report.node_sets,
        page=shown.page,
        total=len(shown.every),
        paged=lambda at: f"/ui?offset={at}",
        controller=_controller(runtime),
        failures=listings.recent_failures(now - RECENT, OVERVIEW_ROWS, visible),
        longest=listings.queued(readable_names)[:OVERVIEW_ROWS],
        now=now,
    )


@router.get("/pools", response_class=HTMLResponse)
def pools(
    authorizer: AuthorizerDep,
    configs: ConfigsDep,
    context: PageContextDep,
    runtime: RuntimeDep,
    request: Request,
    pool: str | None = None,
    platform: str | None = None,
    offset: Offset = 0,
) -> Any:
    principal = context.caller(request)
    state = configs.state()
    shown = _PoolsPage.of(context, principal, runtime, state, offset)
    names, clusters = shown.names, shown.clusters
    quotas = {
        quota.name: quota.usage
        for node_set in shown.usage.report.node_sets
        for quota in node_set.pools
    }
    chosen = pool if pool in set(shown.every) else (names[0] if names else None)
    return context.render(
        request,
        "pools.html",
        pools=[state.pool(name) for name in names],
        quotas=quotas,
        capacities=pool_capacities(state, clusters, names, "NORMAL"),
        borrowing=pool_capacities(state, clusters, names, "LOW"),
        limits={name: gpu_quota(state.pool(name)) for name in names},
        lost=runtime.recently_lost(),
        page=shown.page,
        total=len(shown.every),
        paged=lambda at: "/ui/pools?" + _pool_query(chosen, at),
        chosen=chosen,
        chosen_platforms=list(state.pool(chosen).platforms) if chosen else [],
        **_rendering(authorizer, principal, state, chosen, platform),
    )


@dataclass(frozen=True)
class _PoolsPage:
    """The pools a page lists (a page of those the caller may use) and their quota figures,
    worked out for that page only."""

    every: list[str]
    page: Page
    names: list[str]
    clusters: list[ClusterCapacity]
    usage: PoolUsage

    @staticmethod
    def of(
        context: PageContext, principal: Principal, runtime: Runtime, configs: Configs, offset: int
    ) -> _PoolsPage:
        every = context.usable_pools(principal)
        page = Page(offset)
        names = page.of(every)
        clusters = runtime.capacity(configs)
        usage = pool_usage(configs, clusters, names, runtime.recently_preempted())
        return _PoolsPage(every, page, names, clusters, usage)


def _rendering(
    authorizer: Authorizer,
    principal: Principal,
    configs: Configs,
    chosen: str | None,
    platform: str | None,
) -> dict[str, Any]:
    """What the chosen pool renders, or why it is not shown: ``rendered``, ``refused``,
    ``problem``."""
    found: dict[str, Any] = {"rendered": None, "refused": None, "problem": None}
    if chosen is None:
        return found
    if not configs.pool(chosen).platforms:
        found["problem"] = (
            f"Pool {chosen} has no platforms: every submission to it fails until it has "
            f"one; {NO_PLATFORM_FIX}"
        )
        return found
    try:
        found["rendered"] = rendered_pool(authorizer, principal, configs, chosen, platform, {})
    except ForbiddenError as err:
        found["refused"] = err.message
    except UserError as err:  # one pool's broken templates must not hide the others
        found["problem"] = f"Pool {chosen} does not render: {err.message}"
    return found


def _pool_query(chosen: str | None, offset: int) -> str:
    return urlencode({"pool": chosen or "", "offset": offset})


def _controller(runtime: Runtime) -> dict[str, Any]:
    """What the overview says of the lifecycle controller: this server's part, the lease."""
    lease = runtime.controller_lease()
    return {
        "role": runtime.controller_role(),
        "database": "ok" if runtime.database_ok() else "down",
        "holder": lease.holder if lease else None,
        "epoch": lease.epoch if lease else None,
        "renewals": lease.renewals if lease else None,
    }
