"""Which nodes serve which pools, and the resource listing (docs/resources.md, ``resource list``).

**Membership.** A node serves a pool's platform when a task of that platform could run on it:
it carries every label of the platform's nodeSelector and its taints (other than
``PreferNoSchedule``) are tolerated — the test the submission pipeline applies
(:func:`corral.domain.platform.task_validation.platform_nodes`). A node may serve several
platforms and several pools.

**Type** of a node, over every pool configured (not only those listed):

``RESERVED``
    the node serves exactly one pool (one or more of its platforms);
``SHARED``
    the node serves more than one pool; their workloads compete for it, and ``pool list`` puts
    those pools in one node set;
``UNUSED``
    the node serves no pool: no workflow can run on it. Listed only with ``all``.

**Cells.** Per node, what its pods request (``used``; pods of every pool) against its allocatable
resources (``capacity``): GPUs, CPU cores, memory and ephemeral storage in GiB. As OSMO, used
amounts round up and capacities down, used never shows above capacity, and ``free`` is
``capacity - used``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

from corral.domain.configs.models import Pool
from corral.domain.configs.snapshot import Configs
from corral.domain.formats.quantities import parse_quantity
from corral.domain.platform.node_health import closed_reason
from corral.domain.platform.nodes import GPU_RESOURCE, Node, belongs_to
from corral.domain.platform.resolved_pool import (
    merged_pod_templates,
    platform_template_names,
    spec_field,
)
from corral.domain.platform.security import default_mounts

GI = 2**30
RESERVED = "RESERVED"
SHARED = "SHARED"
UNUSED = "UNUSED"
#: The resources of a listing, in the table's column order, and their units.
RESOURCES = ("storage", "cpu", "memory", "gpu")


class Requested(Protocol):
    """Requests in Kubernetes' integer units (``corral.scheduler.resources.Demand``)."""

    @property
    def gpu(self) -> int: ...
    @property
    def cpu(self) -> int: ...  # millicores
    @property
    def memory(self) -> int: ...  # bytes
    @property
    def storage(self) -> int: ...  # bytes


@dataclass(frozen=True)
class Amounts:
    """Whole GiB of storage, CPU cores, GiB of memory and GPUs: the units of the table."""

    storage: int = 0
    cpu: int = 0
    memory: int = 0
    gpu: int = 0

    def __add__(self, other: Amounts) -> Amounts:
        return Amounts(*(getattr(self, r) + getattr(other, r) for r in RESOURCES))

    def __sub__(self, other: Amounts) -> Amounts:
        return Amounts(*(getattr(self, r) - getattr(other, r) for r in RESOURCES))

    def as_json(self) -> dict[str, int]:
        return {resource: getattr(self, resource) for resource in RESOURCES}


# ------------------------------------------------------------------------------ membership


@dataclass(frozen=True)
class PoolLayout:
    """Which nodes serve which (pool, platform), for every pool configured."""

    #: (pool, platform) -> the names of the nodes serving it, in cluster order.
    platforms: Mapping[tuple[str, str], tuple[str, ...]]
    #: pool -> platform -> the platform's default mounts (for the pool views).
    default_mounts: Mapping[str, Mapping[str, list[str]]]
    #: node -> the lists of (pool, platform) keys serving it, one list per node set: the
    #: platforms of thousands of pools share a few node sets (pool_layout makes them once),
    #: so the index costs per node set, not per pool.
    _by_node: dict[str, list[list[tuple[str, str]]]] = field(init=False, repr=False, compare=False)
    _by_pool: dict[str, list[tuple[str, str]]] = field(init=False, repr=False, compare=False)
    _order: dict[tuple[str, str], int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_pool: dict[str, list[tuple[str, str]]] = {}
        # Keyed by the tuple's identity, not its value: hashing 10,000 tuples of names cost
        # more than the index; equal tuples that are distinct objects only make more sets.
        node_sets: dict[int, tuple[tuple[str, ...], list[tuple[str, str]]]] = {}
        for key, names in self.platforms.items():
            by_pool.setdefault(key[0], []).append(key)
            node_sets.setdefault(id(names), (names, []))[1].append(key)
        by_node: dict[str, list[list[tuple[str, str]]]] = {}
        for names, keys in node_sets.values():
            for name in names:
                by_node.setdefault(name, []).append(keys)
        object.__setattr__(self, "_by_node", by_node)
        object.__setattr__(self, "_by_pool", by_pool)
        object.__setattr__(self, "_order", {key: i for i, key in enumerate(self.platforms)})

    def placements(self, node: str) -> list[tuple[str, str]]:
        """The (pool, platform) pairs ``node`` serves, in config order."""
        found = [key for keys in self._by_node.get(node, []) for key in keys]
        found.sort(key=self._order.__getitem__)
        return found

    def placements_of_pools(
        self, pools: Iterable[str], platforms: Collection[str] = ()
    ) -> dict[str, list[tuple[str, str]]]:
        """Per node, the (pool, platform) pairs of ``pools`` it serves (only ``platforms``
        when given), in config order: the cost of a page of pools, not of every pool."""
        found: dict[str, list[tuple[str, str]]] = {}
        for pool in dict.fromkeys(pools):
            for key in self._by_pool.get(pool, []):
                if platforms and key[1] not in platforms:
                    continue
                for node in self.platforms[key]:
                    found.setdefault(node, []).append(key)
        for keys in found.values():
            keys.sort(key=self._order.__getitem__)
        return found

    def nodes_of_pool(self, pool: str) -> frozenset[str]:
        """The nodes serving any platform of ``pool``."""
        keys = self._by_pool.get(pool, [])
        return frozenset(node for key in keys for node in self.platforms[key])

    def pools_of(self, node: str) -> tuple[str, ...]:
        """The pools ``node`` serves, in config order."""
        return tuple(dict.fromkeys(pool for pool, _ in self.placements(node)))

    def node_type(self, node: str) -> str:
        """UNUSED, RESERVED (one pool) or SHARED: it stops at the second pool it finds."""
        first = None
        for keys in self._by_node.get(node, []):
            for pool, _ in keys:
                if first is None:
                    first = pool
                elif pool != first:
                    return SHARED
        return UNUSED if first is None else RESERVED


def pool_layout(
    configs: Configs, nodes: Sequence[Node], pools: Collection[str] | None = None
) -> PoolLayout:
    """Match every platform of every pool against the nodes, as the submission pipeline does.

    ``pools`` (default: every pool configured) keeps only those pools: the pools whose backend
    has ``nodes``, so that a node's type counts only the pools that could use it. Platforms
    made from the same pod templates share one merge and one match: thousands of pools
    usually come from a few templates."""
    platforms: dict[tuple[str, str], tuple[str, ...]] = {}
    mounts: dict[str, dict[str, list[str]]] = {}
    selections: dict[tuple[str, ...], tuple[tuple[str, ...], list[str]]] = {}
    kept = None if pools is None else set(pools)
    for pool_name, pool in configs.pools().items():
        if kept is not None and pool_name not in kept:
            continue
        mounts[pool_name] = {}
        for platform_name in pool.platforms:
            names = platform_template_names(pool, platform_name)
            if names not in selections:
                selections[names] = _selection(configs, names, nodes)
            served, default_mounts = selections[names]
            platforms[(pool_name, platform_name)] = served
            mounts[pool_name][platform_name] = list(default_mounts)
    return PoolLayout(platforms, mounts)


def _selection(
    configs: Configs, template_names: Sequence[str], nodes: Sequence[Node]
) -> tuple[tuple[str, ...], list[str]]:
    """The nodes a platform made of ``template_names`` serves, and its default mounts."""
    merged = merged_pod_templates(configs, template_names).value
    selector = spec_field(merged, "nodeSelector", dict)
    tolerations = spec_field(merged, "tolerations", list)
    served = tuple(node.name for node in nodes if belongs_to(node, selector, tolerations))
    return served, default_mounts(merged)


# ----------------------------------------------------------------------------------- cells


def capacity_of(node: Node) -> Amounts:
    """The node's allocatable resources in table units, rounded down (missing = 0)."""

    def whole(resource: str, unit: int) -> int:
        value = parse_quantity(str(node.allocatable.get(resource, "0")))
        return max(0, math.floor(value / Decimal(unit)))

    return Amounts(
        storage=whole("ephemeral-storage", GI),
        cpu=whole("cpu", 1),
        memory=whole("memory", GI),
        gpu=whole(GPU_RESOURCE, 1),
    )


def used_of(requested: Requested, capacity: Amounts) -> Amounts:
    """Requests in table units, rounded up and never above ``capacity``."""
    return Amounts(
        storage=min(capacity.storage, -(-requested.storage // GI)),
        cpu=min(capacity.cpu, -(-requested.cpu // 1000)),
        memory=min(capacity.memory, -(-requested.memory // GI)),
        gpu=min(capacity.gpu, requested.gpu),
    )


def cell(used: int, capacity: int, mode: str) -> str:
    """``used/capacity`` (mode ``used``) or ``capacity - used`` (``free``); ``0`` when the node
    has none of the resource."""
    if capacity <= 0:
        return "0"
    return f"{used}/{capacity}" if mode == "used" else str(capacity - used)


# --------------------------------------------------------------------------------- listing


@dataclass(frozen=True)
class NodeResources:
    """One node of a listing: the (pool, platform) rows it is listed under (none for an
    ``UNUSED`` node), and its amounts."""

    name: str
    type: str
    placements: tuple[tuple[str, str], ...]
    capacity: Amounts
    used: Amounts
    #: Why the node takes no new work (None: it does), ``node_health.closed_reason``.
    closed: str | None = None

    @property
    def free(self) -> Amounts:
        """What new work may use: nothing on a closed node (docs/health.md)."""
        return Amounts() if self.closed else self.capacity - self.used

    def as_json(self) -> dict[str, Any]:
        return {
            "node": self.name,
            "type": self.type,
            "pools": [{"pool": pool, "platform": platform} for pool, platform in self.placements],
            "capacity": self.capacity.as_json(),
            "used": self.used.as_json(),
            "free": self.free.as_json(),
            "closed": self.closed,
        }


def list_resources(
    layout: PoolLayout,
    nodes: Iterable[Node],
    requested: Mapping[str, Requested],
    *,
    pools: Sequence[str],
    platforms: Sequence[str] = (),
    include_unused: bool = False,
) -> list[NodeResources]:
    """The nodes serving a platform of ``pools`` (only ``platforms`` when given), sorted by
    name, each with the (pool, platform) rows it is listed under; ``include_unused`` adds the
    nodes serving no pool at all. ``requested`` is what each node's pods request."""
    wanted = layout.placements_of_pools(pools, platforms)
    found: list[NodeResources] = []
    for node in sorted(nodes, key=lambda n: n.name):
        node_type = layout.node_type(node.name)
        placements = tuple(wanted.get(node.name, ()))
        if not placements and not (include_unused and node_type == UNUSED):
            continue
        capacity = capacity_of(node)
        zero: Requested = _NOTHING
        used = used_of(requested.get(node.name, zero), capacity)
        closed = closed_reason(node.health)
        found.append(NodeResources(node.name, node_type, placements, capacity, used, closed))
    return found


def resources_json(listed: Sequence[NodeResources]) -> dict[str, Any]:
    """The answer of ``GET /api/resources``: the nodes and the sum, each node counted once."""
    capacity, used, free = Amounts(), Amounts(), Amounts()
    for node in listed:
        capacity, used, free = capacity + node.capacity, used + node.used, free + node.free
    return {
        "resources": [node.as_json() for node in listed],
        "resource_sum": {
            "capacity": capacity.as_json(),
            "used": used.as_json(),
            "free": free.as_json(),
        },
    }


@dataclass(frozen=True)
class _Nothing:
    gpu: int = 0
    cpu: int = 0
    memory: int = 0
    storage: int = 0


_NOTHING = _Nothing()


def node_amounts(node: Node, requested: Requested | None) -> tuple[Amounts, Amounts]:
    """The node's capacity and what its pods use of it, in the table's units."""
    capacity = capacity_of(node)
    return capacity, used_of(requested or _NOTHING, capacity)


def node_info_json(
    layout: PoolLayout,
    node: Node,
    requested: Requested | None,
    pools: Mapping[str, Pool],
) -> dict[str, Any]:
    """The answer of ``GET /api/resources/{node}``: the node's labels, taints, allocatable
    quantities, amounts, and each (pool, platform) of ``pools`` it serves with the platform's
    security settings and mounts. ``type`` counts every pool configured."""
    capacity, used = node_amounts(node, requested)
    closed = closed_reason(node.health)
    served = []
    for pool_name, platform_name in layout.placements(node.name):
        if pool_name not in pools:
            continue
        platform = pools[pool_name].platforms[platform_name]
        served.append(
            {
                "pool": pool_name,
                "platform": platform_name,
                "description": platform.description,
                "host_network_allowed": platform.host_network_allowed,
                "privileged_allowed": platform.privileged_allowed,
                "default_mounts": list(layout.default_mounts[pool_name][platform_name]),
                "allowed_mounts": list(platform.allowed_mounts),
            }
        )
    return {
        "node": node.name,
        "type": layout.node_type(node.name),
        "labels": dict(node.labels),
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints],
        "allocatable": dict(node.allocatable),
        "capacity": capacity.as_json(),
        "used": used.as_json(),
        "free": Amounts().as_json() if closed else (capacity - used).as_json(),
        "closed": closed,
        "pools": served,
    }
