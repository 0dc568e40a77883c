"""GPU quota and usage per pool, from each cluster's nodes and pods: what ``/api/pool_quota``
answers and what the dashboard draws (docs/resources.md)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from corral.backends.port import BoundPod
from corral.domain.configs.models import Pool
from corral.domain.configs.snapshot import Configs
from corral.domain.labels import PRIORITY as PRIORITY_LABEL
from corral.domain.platform.node_health import closed_reason
from corral.domain.platform.nodes import Node
from corral.domain.views.pool_quota import NodeGpus, QuotaReport, RunningTask, calculate_pool_quotas
from corral.domain.views.resource_listing import PoolLayout, pool_layout
from corral.scheduler.resources import Demand
from corral.scheduler.resources import capacity as capacity_of_node
from corral.services.capacity import ClusterCapacity
from corral.services.memo import SameInputs


@dataclass(frozen=True)
class PoolUsage:
    report: QuotaReport
    #: The pools reported, by name.
    pools: Mapping[str, Pool]
    #: pool -> platform -> its default mounts.
    mounts: Mapping[str, Mapping[str, list[str]]]


def pool_usage(
    configs: Configs,
    clusters: Sequence[ClusterCapacity],
    names: Sequence[str],
    preempted: Mapping[str, int],
) -> PoolUsage:
    """The quota report of the pools ``names`` (each a configured pool)."""
    key = (tuple(names), tuple(sorted(preempted.items())))
    inputs = (configs, *(part for c in clusters for part in (c.nodes, c.pods)))
    return _usages.get(key, inputs, lambda: _pool_usage(configs, clusters, names, preempted))


def _pool_usage(
    configs: Configs,
    clusters: Sequence[ClusterCapacity],
    names: Sequence[str],
    preempted: Mapping[str, int],
) -> PoolUsage:
    configured = configs.pools()
    nodes: list[NodeGpus] = []
    tasks: list[RunningTask] = []
    mounts: dict[str, Mapping[str, list[str]]] = {}
    for cluster in clusters:
        layout = layout_of(configs, cluster.nodes, cluster.pools)
        mounts.update(layout.default_mounts)
        gpus = gpus_per_node(cluster.pods)
        capacity = node_gpus(cluster.nodes)
        # Each node with the pools reported only: a node of 5,000 pools, asked about 50.
        served = layout.placements_of_pools(names)
        nodes.extend(
            # Qualified by cluster: a node name of two clusters is two nodes.
            NodeGpus(
                f"{cluster.backend}/{node.name}",
                capacity[node.name],
                gpus.get(node.name, 0),
                tuple(dict.fromkeys(pool for pool, _ in placements)),
                closed=closed_reason(node.health) is not None,
            )
            for node in cluster.nodes
            if (placements := served.get(node.name))
        )
        tasks.extend(
            RunningTask(
                cluster.pool_of(pod),
                pod.demand.gpu,
                pod.labels.get(PRIORITY_LABEL, "NORMAL"),
            )
            for pod in cluster.pods
        )
    selected = {name: configured[name] for name in names}
    return PoolUsage(calculate_pool_quotas(selected, tasks, nodes, preempted), selected, mounts)


# Which nodes serve which pools, each node's GPUs and the quota report are kept while the
# configuration, the nodes and the bound pods are the same objects: matching every platform
# against 5,000 nodes took a third of a second per request, the report a tenth.
_layouts: SameInputs[PoolLayout] = SameInputs()
_capacities: SameInputs[Mapping[str, int]] = SameInputs()
_usages: SameInputs[PoolUsage] = SameInputs()


def layout_of(configs: Configs, nodes: Sequence[Node], pools: Sequence[str]) -> PoolLayout:
    """:func:`pool_layout`, remembered for the same state, nodes and pools."""
    return _layouts.get(tuple(pools), (configs, nodes), lambda: pool_layout(configs, nodes, pools))


def node_gpus(nodes: Sequence[Node]) -> Mapping[str, int]:
    """Each node's allocatable GPUs, remembered for the same nodes."""
    return _capacities.get(
        len(nodes),
        (nodes,),
        lambda: {node.name: capacity_of_node(node.allocatable).gpu for node in nodes},
    )


def demand_per_node(bound: Iterable[BoundPod]) -> dict[str, Demand]:
    found: dict[str, Demand] = {}
    for pod in bound:
        found[pod.node] = found.get(pod.node, Demand()) + pod.demand
    return found


def gpus_per_node(bound: Iterable[BoundPod]) -> dict[str, int]:
    found: dict[str, int] = {}
    for pod in bound:
        found[pod.node] = found.get(pod.node, 0) + pod.demand.gpu
    return found
