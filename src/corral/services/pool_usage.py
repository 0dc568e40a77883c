"""GPU quota and usage per pool, from each cluster's nodes and pods: what ``/api/pool_quota``
answers and what the dashboard draws (docs/resources.md)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from corral.backends.port import BoundPod
from corral.domain.configs.models import Pool
from corral.domain.configs.snapshot import State, as_configs
from corral.domain.labels import PRIORITY as PRIORITY_LABEL
from corral.domain.views.pool_quota import NodeGpus, QuotaReport, RunningTask, calculate_pool_quotas
from corral.domain.views.resource_listing import pool_layout
from corral.scheduler.resources import Demand, pod_demand
from corral.scheduler.resources import capacity as capacity_of_node
from corral.services.capacity import ClusterCapacity


@dataclass(frozen=True)
class PoolUsage:
    report: QuotaReport
    #: The pools reported, by name.
    pools: Mapping[str, Pool]
    #: pool -> platform -> its default mounts.
    mounts: Mapping[str, Mapping[str, list[str]]]


def pool_usage(
    state: State,
    clusters: Iterable[ClusterCapacity],
    names: Sequence[str],
    preempted: Mapping[str, int],
) -> PoolUsage:
    """The quota report of the pools ``names`` (each a configured pool)."""
    configured = as_configs(state).pools()
    nodes: list[NodeGpus] = []
    tasks: list[RunningTask] = []
    mounts: dict[str, Mapping[str, list[str]]] = {}
    for cluster in clusters:
        layout = pool_layout(state, cluster.nodes, cluster.pools)
        mounts.update(layout.default_mounts)
        gpus = gpus_per_node(cluster.pods)
        nodes.extend(
            # Qualified by cluster: a node name of two clusters is two nodes.
            NodeGpus(
                f"{cluster.backend}/{node.name}",
                capacity_of_node(node.allocatable).gpu,
                gpus.get(node.name, 0),
                pools_of,
            )
            for node in cluster.nodes
            if (pools_of := layout.pools_of(node.name))
        )
        tasks.extend(
            RunningTask(
                cluster.pool_of(pod),
                pod_demand(pod.spec).gpu,
                pod.labels.get(PRIORITY_LABEL, "NORMAL"),
            )
            for pod in cluster.pods
        )
    selected = {name: configured[name] for name in names}
    return PoolUsage(calculate_pool_quotas(selected, tasks, nodes, preempted), selected, mounts)


def demand_per_node(bound: Iterable[BoundPod]) -> dict[str, Demand]:
    found: dict[str, Demand] = {}
    for pod in bound:
        found[pod.node] = found.get(pod.node, Demand()) + pod_demand(pod.spec)
    return found


def gpus_per_node(bound: Iterable[BoundPod]) -> dict[str, int]:
    return {node: demand.gpu for node, demand in demand_per_node(bound).items()}
