"""What a pool can start now, computed from the snapshot and the queue usage the scheduler
places with (``domain/views/capacity.py`` holds the figures and their words).

A task here is a pod of ``g`` GPUs, and of nothing else, that the pool's nodes take: a gang of
``n`` of them requiring a domain of the pool's finest topology level is placed by
``gang.place_pod_set`` exactly when

* every one of them fits an open node of the pool in that domain: a node holds
  ``min(free GPUs // g, free pods)`` of them (a closed node none);
* the domain's NVLink fabric is whole, unless ``n`` is 1 or the pool allows degraded domains
  (``snapshot.whole_fabric_for``);
* the pool's queue takes ``n * g`` more GPUs at the gang's priority (``QueueUsage.refusal``).

``tests/scheduler/test_capacity_model.py`` holds every figure to that, against the scheduler
itself, over random clusters, pools, quotas, health and running work.
"""

from __future__ import annotations

from collections.abc import Sequence

from corral.domain.views.capacity import BORROWING, DomainCapacity, PoolCapacity, QuotaRoom
from corral.scheduler.queues import QueueUsage
from corral.scheduler.snapshot import ClusterSnapshot

#: The domain of the pool's nodes that lack its finest level's label.
UNLABELLED = "(none)"


def quota_room(usage: QueueUsage, queue: str, pool: str, priority: str) -> QuotaRoom:
    """The pool's queue as the scheduler counts it, for work of ``priority``."""
    found = usage.queues.get(queue)
    return QuotaRoom(
        pool=pool,
        priority=priority,
        guarantee=found.gpu_guarantee if found is not None else None,
        maximum=found.gpu_maximum if found is not None else None,
        used=usage.used.get(queue, 0),
        deserved=usage.deserved.get(queue, 0),
    )


def copies_on(snapshot: ClusterSnapshot, node: int, gpus: int) -> int:
    """How many pods of ``gpus`` GPUs (and nothing else) node ``node`` takes now."""
    if gpus <= 0 or snapshot.closed[node] is not None:
        return 0
    return min(snapshot.free_gpu[node] // gpus, snapshot.free_pods[node])


def pool_capacity(
    snapshot: ClusterSnapshot,
    usage: QueueUsage,
    queue: str,
    pool: str,
    members: Sequence[int],
    *,
    priority: str = "NORMAL",
    task_gpus: int | None = None,
) -> PoolCapacity:
    """The pool whose nodes are ``members`` (indices into ``snapshot``), its queue ``queue``,
    for work of ``priority``; per domain of the snapshot's finest level, tasks of ``task_gpus``
    GPUs (None: each domain's whole node)."""
    room = quota_room(usage, queue, pool, priority)
    level = snapshot.levels[-1] if snapshot.levels else ""
    by_domain: dict[str, list[int]] = {}
    for i in members:
        value = snapshot.nodes[i].labels.get(level) if level else None
        key = snapshot.ancestors[i][0].id if value is not None else UNLABELLED
        by_domain.setdefault(key, []).append(i)
    domains = tuple(
        _domain(snapshot, room, key, nodes, task_gpus) for key, nodes in sorted(by_domain.items())
    )
    open_members = [i for i in members if snapshot.closed[i] is None]
    return PoolCapacity(
        quota=room,
        level=level,
        gpus=sum(snapshot.capacity[i].gpu for i in members),
        healthy_gpus=sum(snapshot.capacity[i].gpu for i in open_members),
        idle_gpus=sum(copies_on(snapshot, i, 1) for i in open_members),
        domains=domains,
    )


def _domain(
    snapshot: ClusterSnapshot,
    room: QuotaRoom,
    key: str,
    nodes: Sequence[int],
    task_gpus: int | None,
) -> DomainCapacity:
    gpus = task_gpus if task_gpus is not None else max(snapshot.capacity[i].gpu for i in nodes)
    physical = sum(copies_on(snapshot, i, gpus) for i in nodes)
    fits = physical
    degraded = False
    if key != UNLABELLED:
        domain = snapshot.ancestors[nodes[0]][0]
        level = snapshot.levels[-1]
        degraded = snapshot.degraded(domain) and snapshot.whole_fabric_for(level, 2)
        if degraded:
            fits = min(fits, 1)  # a gang of one needs no fabric
    quota = room.room
    if quota is not None and gpus > 0:
        fits = min(fits, quota // gpus)
    open_nodes = [i for i in nodes if snapshot.closed[i] is None]
    return DomainCapacity(
        domain=_value(snapshot, key, nodes),
        key=key,
        trays=len(nodes),
        healthy=sum(1 for i in nodes if not snapshot.faulty[i]),
        open=len(open_nodes),
        idle=sum(1 for i in open_nodes if _idle(snapshot, i)),
        gpus=sum(snapshot.capacity[i].gpu for i in nodes),
        free_gpus=sum(snapshot.free_gpu[i] for i in open_nodes),
        task_gpus=gpus,
        physical=physical,
        fits=fits,
        degraded=degraded,
    )


def _idle(snapshot: ClusterSnapshot, node: int) -> bool:
    """Whether node ``node`` holds no pod."""
    return snapshot.free_pods[node] == snapshot.capacity[node].pods and (
        snapshot.free_gpu[node] == snapshot.capacity[node].gpu
    )


def _value(snapshot: ClusterSnapshot, key: str, nodes: Sequence[int]) -> str:
    """The domain's own label value, as the pool's views name it."""
    if key == UNLABELLED:
        return UNLABELLED
    return str(snapshot.nodes[nodes[0]].labels[snapshot.levels[-1]])


__all__ = ["BORROWING", "UNLABELLED", "copies_on", "pool_capacity", "quota_room"]
