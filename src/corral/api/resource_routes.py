"""``/api/pool_quota`` and ``/api/resources``: GPU quotas per pool, and resources per node.

Both read the same inputs: the pools as configured now and, per cluster (the embedded one, each
Kubernetes backend: :mod:`corral.services.capacity`), its nodes and the pods holding resources on
them; a pool's platforms are matched only against the nodes of its backend. A caller sees only
the pools it may use (``workflow:Create`` on ``pool/<name>``, as ``GET /api/pool``). See
docs/resources.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Query

from corral.api import responses as R
from corral.api.auth import Authorizer, Principal
from corral.api.config_routes import Caller
from corral.domain.configs.models import Pool
from corral.domain.configs.snapshot import State
from corral.domain.views.pool_quota import (
    queue_figures,
    quota_json,
)
from corral.domain.views.resource_listing import (
    list_resources,
    node_info_json,
    resources_json,
)
from corral.errors import NotFoundError
from corral.services.capacity import ClusterCapacity
from corral.services.config_service import ConfigService
from corral.services.pool_usage import demand_per_node, layout_of, pool_usage

Names = Annotated[list[str], Query()]


def build_resource_router(
    service: ConfigService,
    authorizer: Authorizer,
    capacity: Callable[[State], list[ClusterCapacity]],
    preempted: Callable[[], Mapping[str, int]] = dict,
) -> APIRouter:
    """``capacity`` gives, for a config state, each cluster's nodes, pods and pools
    (:func:`corral.services.capacity.read_capacity`); ``preempted``, per pool, the GPUs evicted
    from it in the last 24 hours."""
    router = APIRouter(tags=["resources"])

    def visible(caller: Principal, pools: Mapping[str, Pool]) -> list[str]:
        return authorizer.allowed_pools(caller, sorted(pools))

    @router.get("/api/pool_quota", response_model=R.PoolQuota)
    def pool_quota(
        caller: Caller,
        pools: Names = [],  # noqa: B006 - FastAPI query list
    ) -> dict[str, Any]:
        """GPU quota and usage per pool, pools grouped in node sets (OSMO's ``pool list``).
        ``pools`` (repeatable) narrows the answer; pools the caller may not use, or that do
        not exist, are left out."""
        authorizer.check(caller, "pool:List")
        state = service.state()
        names = visible(caller, state.pools())
        if pools:
            names = [name for name in names if name in set(pools)]
        usage = pool_usage(state, capacity(state), names, preempted())
        return quota_json(usage.report, usage.pools, usage.mounts)

    @router.get("/api/resources", response_model=R.ResourceList)
    def resources(
        caller: Caller,
        pools: Names = [],  # noqa: B006 - FastAPI query list
        platforms: Names = [],  # noqa: B006 - FastAPI query list
        include_all: Annotated[bool, Query(alias="all")] = False,
    ) -> dict[str, Any]:
        """Per node: the pools and platforms it serves, what its pods request and what it has.
        ``pools`` (default: every pool the caller may use), ``platforms`` narrow the listing;
        ``all`` adds the nodes no pool uses."""
        authorizer.check(caller, "resources:Read")
        state = service.state()
        configured = state.pools()
        names = _named_pools(authorizer, caller, configured, pools) or visible(caller, configured)
        _check_platforms(configured, names, platforms)
        listed = []
        used: dict[str, int] = dict.fromkeys(names, 0)
        for cluster in capacity(state):
            listed.extend(
                list_resources(
                    layout_of(state, cluster.nodes, cluster.pools),
                    cluster.nodes,
                    demand_per_node(cluster.pods),
                    pools=names,
                    platforms=platforms,
                    include_unused=include_all,
                )
            )
            for pod in cluster.pods:
                pool = cluster.pool_of(pod)
                if pool in used:
                    used[pool] += pod.demand.gpu
        answer = resources_json(sorted(listed, key=lambda node: node.name))
        recent = preempted()
        answer["pool_queues"] = [
            queue_figures(name, configured[name], used[name], recent.get(name, 0)) for name in names
        ]
        return answer

    @router.get("/api/resources/{name}", response_model=R.NodeInfo)
    def node_info(caller: Caller, name: str) -> dict[str, Any]:
        """One node: labels, taints, capacity and use, and the pools and platforms (of those
        the caller may use) it serves. A name of several clusters: the first whose node serves
        a pool the caller may use, else the first (embedded, then Kubernetes backends by
        name)."""
        authorizer.check(caller, "resources:Read")
        state = service.state()
        configured = state.pools()
        shown = {pool: configured[pool] for pool in visible(caller, configured)}
        found = []
        for cluster in capacity(state):
            node = cluster.node(name)
            if node is None:
                continue
            demand = demand_per_node(cluster.pods).get(name)
            layout = layout_of(state, cluster.nodes, cluster.pools)
            found.append(node_info_json(layout, node, demand, shown))
        if not found:
            raise NotFoundError(
                f"Node {name} does not exist! `corral resource list --all` lists the nodes."
            )
        return next((info for info in found if info["pools"]), found[0])

    return router


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
    known = {name for pool in pools for name in configured[pool].platforms}
    for platform in platforms:
        if platform not in known:
            raise NotFoundError(
                f"Platform {platform} does not exist in the pools listed! Their platforms: "
                f"{', '.join(sorted(known)) or 'none'}"
            )
