"""``/api/pool_quota`` and ``/api/resources``: GPU quotas per pool, and resources per node.

Both read the same inputs: the pools as configured now, the nodes of the embedded cluster, and
the pods bound to them (the running tasks). A caller sees only the pools it may use
(``workflow:Create`` on ``pool/<name>``, as ``GET /api/pool``). See docs/resources.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Query

from corral.api.auth import Authorizer, Principal
from corral.api.config_routes import Caller
from corral.domain.cluster import Cluster
from corral.domain.config_types import ConfigType
from corral.domain.pool_quota import (
    NodeGpus,
    RunningTask,
    calculate_pool_quotas,
    quota_json,
)
from corral.domain.resource_listing import (
    list_resources,
    node_info_json,
    pool_layout,
    resources_json,
)
from corral.domain.workflow_plan import POOL_LABEL, PRIORITY_LABEL
from corral.errors import NotFoundError
from corral.scheduler.resources import Demand, capacity, pod_demand
from corral.services.config_service import ConfigService
from corral.store.cluster_objects import ClusterObject, ClusterObjectStore

Names = Annotated[list[str], Query()]


def build_resource_router(
    service: ConfigService,
    authorizer: Authorizer,
    cluster: Cluster,
    objects: ClusterObjectStore,
) -> APIRouter:
    router = APIRouter(tags=["resources"])

    def visible(caller: Principal, pools: Mapping[str, Any]) -> list[str]:
        return authorizer.allowed_pools(caller, sorted(pools))

    @router.get("/api/pool_quota")
    def pool_quota(
        caller: Caller,
        pools: Names = [],  # noqa: B006 - FastAPI query list
    ) -> dict[str, Any]:
        """GPU quota and usage per pool, pools grouped in node sets (OSMO's ``pool list``).
        ``pools`` (repeatable) narrows the answer; pools the caller may not use, or that do
        not exist, are left out."""
        authorizer.check(caller, "pool:List")
        state = service.state()
        configured = state.get(ConfigType.POOL, {})
        names = visible(caller, configured)
        if pools:
            names = [name for name in names if name in set(pools)]
        layout = pool_layout(state, cluster.nodes)
        bound = _on_known_nodes(objects.bound_pods(), cluster)
        gpus = _gpus_per_node(bound)
        nodes = [
            NodeGpus(node.name, capacity(node.allocatable).gpu, gpus.get(node.name, 0), pools_of)
            for node in cluster.nodes
            if (pools_of := layout.pools_of(node.name))
        ]
        tasks = [
            RunningTask(
                pod.labels.get(POOL_LABEL),
                pod_demand(pod.body.get("spec") or {}).gpu,
                pod.labels.get(PRIORITY_LABEL, "NORMAL"),
            )
            for pod in bound
        ]
        selected = {name: configured[name] for name in names}
        report = calculate_pool_quotas(selected, tasks, nodes)
        return quota_json(report, selected, layout.default_mounts)

    @router.get("/api/resources")
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
        configured = state.get(ConfigType.POOL, {})
        names = _named_pools(authorizer, caller, configured, pools) or visible(caller, configured)
        _check_platforms(configured, names, platforms)
        layout = pool_layout(state, cluster.nodes)
        listed = list_resources(
            layout,
            cluster.nodes,
            _demand_per_node(_on_known_nodes(objects.bound_pods(), cluster)),
            pools=names,
            platforms=platforms,
            include_unused=include_all,
        )
        return resources_json(listed)

    @router.get("/api/resources/{name}")
    def node_info(caller: Caller, name: str) -> dict[str, Any]:
        """One node: labels, taints, capacity and use, and the pools and platforms (of those
        the caller may use) it serves."""
        authorizer.check(caller, "resources:Read")
        node = cluster.node(name)
        if node is None:
            raise NotFoundError(
                f"Node {name} does not exist! `corral resource list --all` lists the nodes."
            )
        state = service.state()
        configured = state.get(ConfigType.POOL, {})
        shown = {pool: configured[pool] for pool in visible(caller, configured)}
        demand = _demand_per_node(_on_known_nodes(objects.bound_pods(), cluster)).get(name)
        return node_info_json(pool_layout(state, cluster.nodes), node, demand, shown)

    return router


def _named_pools(
    authorizer: Authorizer,
    caller: Principal,
    configured: Mapping[str, Any],
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
    configured: Mapping[str, Any], pools: Sequence[str], platforms: Sequence[str]
) -> None:
    known = {name for pool in pools for name in configured[pool].get("platforms") or {}}
    for platform in platforms:
        if platform not in known:
            raise NotFoundError(
                f"Platform {platform} does not exist in the pools listed! Their platforms: "
                f"{', '.join(sorted(known)) or 'none'}"
            )


def _on_known_nodes(bound: list[ClusterObject], cluster: Cluster) -> list[ClusterObject]:
    """Pods of nodes the cluster still has (a shrunk cluster description leaves others)."""
    return [pod for pod in bound if pod.node is not None and cluster.node(pod.node) is not None]


def _demand_per_node(bound: list[ClusterObject]) -> dict[str, Demand]:
    found: dict[str, Demand] = {}
    for pod in bound:
        assert pod.node is not None
        found[pod.node] = found.get(pod.node, Demand()) + pod_demand(pod.body.get("spec") or {})
    return found


def _gpus_per_node(bound: list[ClusterObject]) -> dict[str, int]:
    return {node: demand.gpu for node, demand in _demand_per_node(bound).items()}
