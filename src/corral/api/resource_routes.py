"""``/api/pool``, ``/api/pool_quota`` and ``/api/resources``: the pools, GPU quotas per pool,
and resources per node.

Both read the same inputs: the pools as configured now and, per cluster (the embedded one, each
Kubernetes backend: :mod:`corral.services.capacity`), its nodes and the pods holding resources on
them; a pool's platforms are matched only against the nodes of its backend. A caller sees only
the pools it may use (``workflow:Create`` on ``pool/<name>``, as ``GET /api/pool``). See
docs/resources.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Query

from corral.api import responses as R
from corral.api.auth import Authorizer, Principal
from corral.api.deps import (
    AuthorizerDep,
    Caller,
    CapacityDep,
    ConfigsDep,
    LostDep,
    PreemptedDep,
)
from corral.api.paging import PageDep
from corral.domain.configs.models import Pool
from corral.domain.views.osmo_resources import osmo_entry
from corral.domain.views.pool_quota import (
    pool_minimal,
    queue_figures,
    quota_json,
)
from corral.domain.views.resource_listing import (
    NodeResources,
    list_resources,
    node_amounts,
    node_info_json,
    resources_json,
)
from corral.errors import NotFoundError
from corral.services.capacity import ClusterCapacity
from corral.services.pool_usage import demand_per_node, layout_of, pool_usage

Names = Annotated[list[str], Query()]


router = APIRouter(tags=["resources"])


def visible(authorizer: Authorizer, caller: Principal, pools: Mapping[str, Pool]) -> list[str]:
    return authorizer.allowed_pools(caller, sorted(pools))


@router.get("/api/pool", response_model=R.PoolList)
def list_pools(
    authorizer: AuthorizerDep,
    capacity: CapacityDep,
    service: ConfigsDep,
    caller: Caller,
    page: PageDep,
    pools: Names = [],  # noqa: B006 - FastAPI query list
    all_pools: bool = False,
) -> dict[str, Any]:
    """OSMO's PoolMinimal of each pool the caller may submit to, by name, a page of them;
    ``pools`` narrows them (unless ``all_pools=true``)."""
    authorizer.check(caller, "pool:List")
    state = service.state()
    configured = state.pools()
    names = visible(authorizer, caller, configured)
    if pools and not all_pools:
        names = [name for name in names if name in set(pools)]
    shown = page.of(names)
    mounts: dict[str, Mapping[str, list[str]]] = {}
    for cluster in capacity(state):
        mounts.update(layout_of(state, cluster.nodes, cluster.pools).default_mounts)
    return {
        "pools": {name: pool_minimal(configured[name], mounts.get(name, {})) for name in shown},
        "page": page.about(len(names)),
    }


@router.get("/api/pool_quota", response_model=R.PoolQuota)
def pool_quota(
    authorizer: AuthorizerDep,
    capacity: CapacityDep,
    preempted: PreemptedDep,
    service: ConfigsDep,
    caller: Caller,
    page: PageDep,
    pools: Names = [],  # noqa: B006 - FastAPI query list
) -> dict[str, Any]:
    """GPU quota and usage per pool, a page of pools grouped in node sets (OSMO's ``pool
    list``). ``pools`` (repeatable) narrows the answer; pools the caller may not use, or that
    do not exist, are left out."""
    authorizer.check(caller, "pool:List")
    state = service.state()
    names = visible(authorizer, caller, state.pools())
    if pools:
        names = [name for name in names if name in set(pools)]
    usage = pool_usage(state, capacity(state), page.of(names), preempted())
    return {**quota_json(usage.report, usage.pools, usage.mounts), "page": page.about(len(names))}


@router.get("/api/resources", response_model=R.ResourceList)
def resources(
    authorizer: AuthorizerDep,
    capacity: CapacityDep,
    preempted: PreemptedDep,
    lost: LostDep,
    service: ConfigsDep,
    caller: Caller,
    page: PageDep,
    pools: Names = [],  # noqa: B006 - FastAPI query list
    platforms: Names = [],  # noqa: B006 - FastAPI query list
    include_all: Annotated[bool, Query(alias="all")] = False,
    all_pools: bool = False,
) -> dict[str, Any]:
    """Per node: the pools and platforms it serves, what its pods request and what it has,
    for a page of pools. ``pools`` (default, and with ``all_pools=true``: every pool the
    caller may use), ``platforms`` narrow the listing; ``all`` adds the nodes no pool uses
    (to the last page)."""
    authorizer.check(caller, "resources:Read")
    state = service.state()
    configured = state.pools()
    named = [] if all_pools else _named_pools(authorizer, caller, configured, pools)
    every = named or visible(authorizer, caller, configured)
    _check_platforms(configured, every, platforms)
    names = page.of(every)
    include_all = include_all and page.next_offset(len(every)) is None
    listed: list[tuple[NodeResources, dict[str, Any]]] = []
    used: dict[str, int] = dict.fromkeys(names, 0)
    for cluster in capacity(state):
        layout = layout_of(state, cluster.nodes, cluster.pools)
        backend = backend_of(cluster, configured)
        for found in list_resources(
            layout,
            cluster.nodes,
            demand_per_node(cluster.pods),
            pools=names,
            platforms=platforms,
            include_unused=include_all,
        ):
            node = cluster.node(found.name)
            assert node is not None  # listed from this cluster's nodes
            entry = osmo_entry(
                node,
                found.type,
                found.placements,
                (found.capacity, found.used),
                configured,
                layout,
                backend,
            )
            listed.append((found, {**entry, **found.as_json()}))
        for pod in cluster.pods:
            pool = cluster.pool_of(pod)
            if pool in used:
                used[pool] += pod.demand.gpu
    listed.sort(key=lambda pair: pair[0].name)
    answer = {
        **resources_json([found for found, _ in listed]),
        "resources": [entry for _, entry in listed],
    }
    recent, losses = preempted(), lost()
    answer["pool_queues"] = [
        queue_figures(
            name, configured[name], used[name], recent.get(name, 0), losses.get(name, 0.0)
        )
        for name in names
    ]
    answer["page"] = page.about(len(every))
    return answer


@router.get("/api/resources/{name}", response_model=R.NodeInfoList)
def node_info(
    authorizer: AuthorizerDep, capacity: CapacityDep, service: ConfigsDep, caller: Caller, name: str
) -> dict[str, Any]:
    """The node of that name in each cluster (OSMO's ``{"resources": [...]}``): labels,
    taints, capacity and use, and the pools and platforms (of those the caller may use)
    it serves. The first entry is the node that serves a pool the caller may use, else
    the embedded cluster's, then the Kubernetes backends' by name."""
    authorizer.check(caller, "resources:Read")
    state = service.state()
    configured = state.pools()
    shown = {pool: configured[pool] for pool in visible(authorizer, caller, configured)}
    found = []
    for cluster in capacity(state):
        node = cluster.node(name)
        if node is None:
            continue
        demand = demand_per_node(cluster.pods).get(name)
        layout = layout_of(state, cluster.nodes, cluster.pools)
        info = node_info_json(layout, node, demand, shown)
        placements = [(p["pool"], p["platform"]) for p in info["pools"]]
        amounts = node_amounts(node, demand)
        entry = osmo_entry(
            node,
            info["type"],
            placements,
            amounts,
            configured,
            layout,
            backend_of(cluster, configured),
        )
        found.append({**entry, **info})
    if not found:
        raise NotFoundError(
            f"Node {name} does not exist! `corral resource list --all` lists the nodes."
        )
    found.sort(key=lambda info: not info["pools"])  # stable: cluster order otherwise
    return {"resources": found}


def backend_of(cluster: ClusterCapacity, configured: Mapping[str, Pool]) -> str:
    """The backend config the cluster's pools name (OSMO's ``backend`` of a node), else the
    cluster's own name."""
    for pool in cluster.pools:
        if pool in configured:
            return configured[pool].backend
    return cluster.backend


def _named_pools(
    authorizer: Authorizer,
    caller: Principal,
    configured: Mapping[str, Pool],
    pools: Sequence[str],
) -> list[str]:
    """The named pools, each checked: it must exist (404) and the caller may use it (403)."""
    for pool in pools:
        if pool not in configured:
            raise NotFoundError(
                f"Pool {pool} does not exist! `corral pool list` shows the pools you may use."
            )
        authorizer.check(
            caller, "workflow:Create", f"pool/{pool}", what=f"see the resources of pool {pool}"
        )
    return list(dict.fromkeys(pools))


def _check_platforms(
    configured: Mapping[str, Pool], pools: Sequence[str], platforms: Sequence[str]
) -> None:
    if not platforms:
        return
    known = {name for pool in pools for name in configured[pool].platforms}
    for platform in platforms:
        if platform not in known:
            raise NotFoundError(
                f"Platform {platform} does not exist in the pools listed! Their platforms: "
                f"{', '.join(sorted(known)) or 'none'}"
            )
