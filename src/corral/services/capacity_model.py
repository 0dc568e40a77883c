"""The capacity model every view reads (docs/resources.md#what-fits-now): a cluster's live
occupancy read into the scheduler's own state (``scheduler/cache.py``: its snapshots, its
queue usage), and each pool's figures computed there (``scheduler/capacity.py``). The overview,
the pools page, the topology page, ``pool shapes`` and the queue all ask here, so that they say
what the scheduler would do.

The scheduler's state of one cluster is built once per change of the configuration, the nodes
(their health included) or the bound pods, and each pool's figures once per priority and task
size (``services/memo.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from corral.domain.configs.snapshot import Configs
from corral.domain.labels import GROUP_UUID
from corral.domain.topology.fabric import fabric_rule
from corral.domain.topology.podgroup import queue_name
from corral.domain.views.capacity import PoolCapacity
from corral.scheduler.cache import SchedulerCache
from corral.scheduler.capacity import pool_capacity as computed
from corral.scheduler.queues import pool_queues
from corral.scheduler.records import BoundPodOnNode
from corral.services.capacity import ClusterCapacity
from corral.services.memo import SameInputs
from corral.services.pool_usage import layout_of


def scheduler_state(configs: Configs, cluster: ClusterCapacity) -> SchedulerCache:
    """The scheduler's state of ``cluster`` now, as the controller would read it (read only:
    nothing is placed in it)."""
    return _states.get(
        cluster.backend,
        (configs, cluster.nodes, cluster.pods),
        lambda: SchedulerCache(
            cluster.nodes,
            pool_queues(configs),
            [
                BoundPodOnNode(
                    pod.name, pod.node, pod.labels.get(GROUP_UUID), pod.labels, pod.spec, pod.demand
                )
                for pod in cluster.pods
            ],
        ),
    )


def pool_capacity(
    configs: Configs,
    cluster: ClusterCapacity,
    pool: str,
    *,
    priority: str = "NORMAL",
    task_gpus: int | None = None,
) -> PoolCapacity:
    """What ``pool`` (of ``cluster``) can start now at ``priority``; per domain of its finest
    level, tasks of ``task_gpus`` GPUs (None: a whole node's)."""
    return _capacities.get(
        (cluster.backend, pool, priority, task_gpus),
        (configs, cluster.nodes, cluster.pods),
        lambda: _computed(configs, cluster, pool, priority, task_gpus),
    )


def pool_capacities(
    configs: Configs, clusters: Sequence[ClusterCapacity], pools: Sequence[str], priority: str
) -> dict[str, PoolCapacity]:
    """:func:`pool_capacity` of each of ``pools`` (configured ones) at ``priority``, by name; a
    pool no cluster serves is left out."""
    found: dict[str, PoolCapacity] = {}
    for cluster in clusters:
        served = set(cluster.pools)
        for pool in pools:
            if pool in served:
                found[pool] = pool_capacity(configs, cluster, pool, priority=priority)
    return found


def _computed(
    configs: Configs, cluster: ClusterCapacity, pool: str, priority: str, task_gpus: int | None
) -> PoolCapacity:
    config = configs.pool(pool)
    cache = scheduler_state(configs, cluster)
    snapshot = cache.snapshot(tuple(k.label for k in config.topology_keys), fabric_rule(config))
    layout = layout_of(configs, cluster.nodes, cluster.pools)
    serving = layout.nodes_of_pool(pool)
    members = [snapshot.index[node.name] for node in cluster.nodes if node.name in serving]
    queue = queue_name(configs.backend(config.backend).k8s_namespace, pool)
    return computed(
        snapshot, cache.usage, queue, pool, members, priority=priority, task_gpus=task_gpus
    )


#: The scheduler's state per cluster, and each pool's figures, kept while their inputs are the
#: same objects.
_states: SameInputs[SchedulerCache] = SameInputs()
_capacities: SameInputs[PoolCapacity] = SameInputs(size=4096)
