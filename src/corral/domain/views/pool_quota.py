"""The pool quota table: how many GPUs each pool uses, may use, and could use (docs/resources.md).

OSMO's ``calculate_pool_quotas``, given

* the pools (their configs: ``resources.gpu.guarantee`` is the quota, -1 = no quota),
* the running tasks (their pool, GPUs and priority: corral's pods bound to a node), and
* the nodes (GPUs allocatable and in use, and the pools each node serves),

answers per pool:

``quota_used``
    GPUs of the pool's running HIGH and NORMAL tasks. LOW tasks are preemptible: they may borrow
    GPUs beyond the quota and do not count against it.
``quota_limit``
    the pool's ``guarantee``; with -1 (no quota) the pool's ``total_capacity``.
``quota_free``
    ``quota_limit - quota_used``; below 0 while HIGH/NORMAL tasks run above the guarantee
    (KAI lets a queue go over its quota up to ``maximum`` when others leave GPUs idle).
``total_usage``
    GPUs of all the pool's running tasks, LOW included.
``total_capacity`` / ``total_free``
    allocatable GPUs of the nodes the pool itself may run on, and those not taken by any pod
    (whatever its pool) on nodes that take new work: a NotReady, cordoned or fabric-failed
    node's idle GPUs are not free (docs/health.md). This is the pool's own figure: the same
    whoever asks and whichever pools are listed with it. (OSMO gives each pool its node set's
    capacity, which changes with the pools in the answer.)

corral adds (docs/scheduler.md#queues-priorities-and-preemption):

``quota_maximum``
    the pool's ``maximum`` (every GPU its work may hold at once); with -1 its
    ``total_capacity``.
``borrowed``
    GPUs the pool's running tasks use above its ``guarantee`` (only LOW work can be there:
    what a pool below its guarantee may reclaim); 0 without a guarantee.
``preempted``
    GPUs of the pool's task groups evicted by preemption or reclaim in the last 24 hours.

A node set is a group of pools that share nodes, transitively: if a and b share a node and b and
c do, a, b and c form one set, shown together (the CLI marks the shared capacity). The sum row
counts the union of each set's nodes once. A pool without nodes is a set of its own.
Everything here is pure; :mod:`corral.api.resource_routes` gathers the inputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corral.domain.configs.models import GpuQuota, Pool

#: What ``resources.gpu`` is when a pool does not set it (OSMO's defaults: no quota).
UNLIMITED = -1
#: The priority whose tasks do not count against the quota.
PREEMPTIBLE = "LOW"
#: The fields of ``resource_usage`` in the order OSMO's API gives them, then corral's.
USAGE_FIELDS = (
    "quota_used",
    "quota_free",
    "quota_limit",
    "total_usage",
    "total_capacity",
    "total_free",
)
QUEUE_FIELDS = ("quota_maximum", "borrowed", "preempted")
#: corral only: the GPUs of the pool's nodes that take new work (docs/health.md).
HEALTH_FIELDS = ("healthy_capacity",)
#: The PoolMinimal fields of the JSON answer, in OSMO's order.
POOL_FIELDS = (
    "name",
    "description",
    "status",
    "backend",
    "default_platform",
    "download_type",
    "enable_maintenance",
    "default_exec_timeout",
    "default_queue_timeout",
    "max_exec_timeout",
    "max_queue_timeout",
    "default_exit_actions",
    "resources",
    "topology_keys",
    "platforms",
)


@dataclass(frozen=True)
class RunningTask:
    """One running task (a pod bound to a node): its pool (None if unknown), GPUs, priority."""

    pool: str | None
    gpu: int
    priority: str = "NORMAL"


@dataclass(frozen=True)
class NodeGpus:
    """A node's allocatable GPUs, the GPUs its pods take, and the pools it serves."""

    name: str
    allocatable: int
    usage: int
    pools: tuple[str, ...]
    #: The node takes no new work (docs/health.md): none of its GPUs are free.
    closed: bool = False

    @property
    def withheld(self) -> int:
        """Its GPUs that are neither used nor free: those of a closed node not in use."""
        return max(self.allocatable - self.usage, 0) if self.closed else 0


@dataclass(frozen=True)
class ResourceUsage:
    quota_used: int
    quota_free: int
    quota_limit: int
    total_usage: int
    total_capacity: int
    total_free: int
    quota_maximum: int = 0
    borrowed: int = 0
    preempted: int = 0
    healthy_capacity: int = 0

    def as_json(self) -> dict[str, str]:
        """As OSMO's API answers it: every value a string (corral's fields last)."""
        fields = (*USAGE_FIELDS, *QUEUE_FIELDS, *HEALTH_FIELDS)
        return {name: str(getattr(self, name)) for name in fields}


@dataclass(frozen=True)
class PoolQuota:
    name: str
    usage: ResourceUsage


@dataclass(frozen=True)
class NodeSet:
    """Pools sharing nodes (first pool first) and the GPUs of their nodes, counted once."""

    pools: tuple[PoolQuota, ...]
    capacity: int
    free: int
    #: The GPUs of its nodes that take new work.
    healthy: int = 0


@dataclass(frozen=True)
class QuotaReport:
    node_sets: tuple[NodeSet, ...]
    total: ResourceUsage


def status_of(pool: Pool) -> str:
    """``MAINTENANCE`` when the pool is in maintenance; otherwise ``ONLINE`` (the embedded
    backend is part of the server, so it is always up)."""
    return "MAINTENANCE" if pool.enable_maintenance else "ONLINE"


def gpu_quota(pool: Pool) -> dict[str, int]:
    """``resources.gpu`` with OSMO's defaults for what is missing (-1, -1, 1)."""
    return (pool.resources.gpu or GpuQuota()).model_dump()


def node_sets(pool_names: Sequence[str], nodes: Iterable[NodeGpus]) -> list[list[str]]:
    """The pools grouped by shared nodes, transitively (connected components), in the order of
    ``pool_names``; pools with no node each form their own set. Unknown pools are skipped.

    Nodes serving the same pools are joined once (union-find over each distinct group): with
    5,000 pools on every node, joining them pairwise per node took seconds."""
    order = {name: index for index, name in enumerate(pool_names)}
    parent = {name: name for name in pool_names}

    def root(pool: str) -> str:
        while parent[pool] != pool:
            parent[pool] = parent[parent[pool]]
            pool = parent[pool]
        return pool

    for served in _served_groups(order, nodes):
        first = root(served[0])
        for pool in served[1:]:
            other = root(pool)
            if other != first:
                parent[other] = first
    members: dict[str, list[str]] = {}
    for name in pool_names:
        members.setdefault(root(name), []).append(name)
    return sorted(members.values(), key=lambda found: order[found[0]])


def _served_groups(known: Mapping[str, int], nodes: Iterable[NodeGpus]) -> set[tuple[str, ...]]:
    """Each distinct group of known pools that some node serves."""
    return {
        served
        for node in nodes
        if (served := tuple(pool for pool in dict.fromkeys(node.pools) if pool in known))
    }


def calculate_pool_quotas(
    pools: Mapping[str, Pool],
    tasks: Iterable[RunningTask],
    nodes: Iterable[NodeGpus],
    preempted: Mapping[str, int] | None = None,
) -> QuotaReport:
    """Per pool and node set, the quota and capacity figures of the module docstring.

    ``pools`` (name -> config) are the pools to report, in that order; tasks of other pools
    and nodes' other pools are ignored. Nodes with the same name count once (the last wins).
    ``preempted``: per pool, the GPUs evicted from it in the last 24 hours."""
    names = list(pools)
    by_name = {node.name: node for node in nodes}
    used, quota_used = _task_gpus(names, tasks)
    sets = node_sets(names, by_name.values())
    own, per_set = _node_gpus(names, sets, by_name.values())
    found: list[NodeSet] = []
    for members, summed in zip(sets, per_set, strict=True):
        quotas = []
        for name in members:
            capacity = own[name].capacity
            quota = gpu_quota(pools[name])
            guarantee, maximum = quota["guarantee"], quota["maximum"]
            limit = capacity if guarantee == UNLIMITED else guarantee
            usage = ResourceUsage(
                quota_used=quota_used[name],
                quota_free=limit - quota_used[name],
                quota_limit=limit,
                total_usage=used[name],
                total_capacity=capacity,
                total_free=capacity - own[name].taken,
                quota_maximum=capacity if maximum == UNLIMITED else maximum,
                borrowed=borrowed_gpus(pools[name], used[name]),
                preempted=(preempted or {}).get(name, 0),
                healthy_capacity=own[name].healthy,
            )
            quotas.append(PoolQuota(name, usage))
        found.append(
            NodeSet(tuple(quotas), summed.capacity, summed.capacity - summed.taken, summed.healthy)
        )
    return QuotaReport(tuple(found), _total(found))


@dataclass
class _Gpus:
    """GPUs of some nodes: all, those taken (used, or withheld by a closed node), healthy."""

    capacity: int = 0
    taken: int = 0
    healthy: int = 0

    def add(self, other: _Gpus) -> None:
        self.capacity += other.capacity
        self.taken += other.taken
        self.healthy += other.healthy


def _task_gpus(
    names: list[str], tasks: Iterable[RunningTask]
) -> tuple[dict[str, int], dict[str, int]]:
    """Per pool, the GPUs of its running tasks, and of those the ones counted in its quota."""
    used = dict.fromkeys(names, 0)
    quota_used = dict.fromkeys(names, 0)
    for task in tasks:
        if task.pool not in used:
            continue
        used[task.pool] += task.gpu
        if task.priority.upper() != PREEMPTIBLE:
            quota_used[task.pool] += task.gpu
    return used, quota_used


def _node_gpus(
    names: list[str], sets: list[list[str]], nodes: Iterable[NodeGpus]
) -> tuple[dict[str, _Gpus], list[_Gpus]]:
    """What each pool owns, and each node set's GPUs (a node counts once per set: its pools
    are all in it). One pass over the nodes, summed per group of pools they serve."""
    set_of = {pool: index for index, members in enumerate(sets) for pool in members}
    groups: dict[tuple[str, ...], _Gpus] = {}
    for node in nodes:
        served = tuple(pool for pool in dict.fromkeys(node.pools) if pool in set_of)
        if served:
            taken = node.usage + node.withheld  # a closed node's idle GPUs are not free either
            healthy = 0 if node.closed else node.allocatable
            groups.setdefault(served, _Gpus()).add(_Gpus(node.allocatable, taken, healthy))
    own = {name: _Gpus() for name in names}
    per_set = [_Gpus() for _ in sets]
    for served, summed in groups.items():
        per_set[set_of[served[0]]].add(summed)
        for pool in served:
            own[pool].add(summed)
    return own, per_set


def _total(found: list[NodeSet]) -> ResourceUsage:
    """The sums row: the quota columns over the pools, capacity over the node sets."""
    every = [pool.usage for node_set in found for pool in node_set.pools]
    return ResourceUsage(
        quota_used=sum(u.quota_used for u in every),
        quota_free=sum(u.quota_free for u in every),
        quota_limit=sum(u.quota_limit for u in every),
        total_usage=sum(u.total_usage for u in every),
        total_capacity=sum(s.capacity for s in found),
        total_free=sum(s.free for s in found),
        quota_maximum=sum(u.quota_maximum for u in every),
        borrowed=sum(u.borrowed for u in every),
        preempted=sum(u.preempted for u in every),
        healthy_capacity=sum(s.healthy for s in found),
    )


def queue_figures(
    name: str, pool: Pool, used: int, preempted: int, lost_gpu_seconds: float = 0.0
) -> dict[str, int | float | str]:
    """A pool's queue in ``resource list``: its guarantee and maximum (-1: none), the GPUs its
    running tasks use, of those borrowed above the guarantee, preempted in 24 hours, and the
    GPU-hours those preempted gangs lost since their checkpoints."""
    quota = gpu_quota(pool)
    return {
        "pool": name,
        "guarantee": quota["guarantee"],
        "maximum": quota["maximum"],
        "used": used,
        "borrowed": borrowed_gpus(pool, used),
        "preempted": preempted,
        "lost_gpu_hours": round(lost_gpu_seconds / 3600, 2),
    }


def borrowed_gpus(pool: Pool, total_usage: int) -> int:
    """GPUs the pool uses above its guarantee (0 without one)."""
    guarantee = gpu_quota(pool)["guarantee"]
    return 0 if guarantee == UNLIMITED else max(0, total_usage - guarantee)


def pool_minimal(pool: Pool, default_mounts: Mapping[str, list[str]]) -> dict[str, Any]:
    """OSMO's PoolMinimal view of a stored pool; ``default_mounts`` per platform name."""
    view: dict[str, Any] = {}
    for field in POOL_FIELDS:
        if field == "status":
            view[field] = status_of(pool)
        elif field == "resources":
            view[field] = {"gpu": gpu_quota(pool)}
        elif field == "platforms":
            view[field] = {
                name: {
                    "description": platform.description,
                    "host_network_allowed": platform.host_network_allowed,
                    "privileged_allowed": platform.privileged_allowed,
                    "allowed_mounts": list(platform.allowed_mounts),
                    "default_mounts": list(default_mounts.get(name, [])),
                }
                for name, platform in pool.platforms.items()
            }
        else:
            view[field] = pool.model_dump(mode="json", include={field})[field]
    return view


def quota_json(
    report: QuotaReport,
    pools: Mapping[str, Pool],
    default_mounts: Mapping[str, Mapping[str, list[str]]],
) -> dict[str, Any]:
    """The answer of ``GET /api/pool_quota``: ``node_sets`` of PoolMinimal + ``resource_usage``,
    and ``resource_sum`` (values as strings, as OSMO)."""
    return {
        "node_sets": [
            {
                "pools": [
                    {
                        **pool_minimal(pools[quota.name], default_mounts.get(quota.name, {})),
                        "resource_usage": quota.usage.as_json(),
                    }
                    for quota in node_set.pools
                ]
            }
            for node_set in report.node_sets
        ],
        "resource_sum": report.total.as_json(),
    }
