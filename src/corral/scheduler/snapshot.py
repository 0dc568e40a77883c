"""A cluster snapshot: free capacity per node and per topology domain, kept up to date
incrementally as pods are bound and released (Kueue's TAS snapshot, KAI's domain tree).

The tree, coarsest first (docs/osmo-reference.md#kais-topology-and-gang-semantics)::

    cluster root (every node)
    ├── topology root (nodes carrying every level label)
    │   └── level-0 domains ─ ... ─ finest-level domains (hold the nodes)
    └── unlabelled (nodes missing a level label: usable by unconstrained pods only)

A domain at level *i* is identified by the dot-joined label values of levels 0..*i*, so equal
rack names under different zones are different domains. Every domain keeps the sums of its
nodes' free resources and a histogram of its nodes' free GPUs; a bind or release updates the
node's ancestors only, never the other nodes.

A node that may take no new pod (NotReady, cordoned, its fabric failed:
``domain/platform/node_health.py``) is *closed*: its pods keep what they hold, but it fits no
new pod, and its domains count none of its free capacity (their sums and histograms see it as
full). ``health=False`` builds a snapshot that ignores health (the could-never-run check judges
against the whole configured cluster).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.domain.platform.node_affinity import NO_AFFINITY, NodeAffinity
from corral.domain.platform.node_health import closed_reason, faulty, faulty_reason
from corral.domain.platform.nodes import Node, belongs_to
from corral.domain.topology.fabric import NO_FABRIC_RULE, FabricRule
from corral.scheduler.packing_policy import Packing
from corral.scheduler.resources import Demand, Extended, capacity

TOPOLOGY_ROOT = -1
CLUSTER_ROOT = -2
UNLABELLED = -3


@dataclass(eq=False, slots=True)
class Domain:
    """A set of nodes sharing the label values of levels 0..``level``."""

    id: str
    level: int  # index into the snapshot's levels; TOPOLOGY_ROOT / CLUSTER_ROOT for the roots
    parent: Domain | None
    #: The domains at levels 0..level that contain this one (this one last), for O(1) "is X
    #: inside Y" checks.
    path: tuple[Domain, ...] = ()
    children: list[Domain] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)  # only in domains without children
    free_gpu: int = 0
    free_cpu: int = 0
    free_memory: int = 0
    free_storage: int = 0
    #: gpu_histogram[g] = how many of its nodes have exactly g free GPUs.
    gpu_histogram: list[int] = field(default_factory=list)
    #: How many of its trays are faulty (``domain/topology/fabric.py``): at the pool's NVLink
    #: level, a domain with any is degraded.
    faulty: int = 0

    def max_node_gpu(self) -> int:
        """The most free GPUs on any one of its nodes (-1 when it has no nodes)."""
        histogram = self.gpu_histogram
        for free in range(len(histogram) - 1, -1, -1):
            if histogram[free]:
                return free
        return -1

    def copies_fitting(self, gpu: int) -> int:
        """How many pods of ``gpu`` GPUs (> 0) its nodes' free GPUs could hold."""
        histogram = self.gpu_histogram
        return sum(histogram[free] * (free // gpu) for free in range(gpu, len(histogram)))

    @property
    def value(self) -> str:
        """Its own label value (the last part of ``id``)."""
        parent = self.parent
        if parent is None or parent.level < 0:
            return self.id
        return self.id[len(parent.id) + 1 :]

    def contains(self, other: Domain) -> bool:
        """Whether ``other`` is this domain or inside it."""
        if self.level == CLUSTER_ROOT:
            return True
        if self.level < 0:
            return other is self or (self.level == TOPOLOGY_ROOT and other.level >= 0)
        return len(other.path) > self.level and other.path[self.level] is self


@dataclass(frozen=True, slots=True)
class Binding:
    """One pod on one node, with what it takes there."""

    pod: str
    node: str
    demand: Demand


class ClusterSnapshot:
    """Free capacity of a cluster's nodes and topology domains; see the module docstring."""

    def __init__(
        self,
        nodes: Sequence[Node],
        levels: Sequence[str],
        packing: Packing = Packing.BEST_FIT,
        *,
        health: bool = True,
        fabric: FabricRule = NO_FABRIC_RULE,
    ) -> None:
        if len(set(levels)) != len(levels):
            raise ValueError(f"topology levels must be unique, got {list(levels)}")
        #: How gangs are packed (``scheduler/packing.py``); the older order for comparisons.
        self.packing = packing
        self.levels: tuple[str, ...] = tuple(levels)
        self.nodes: tuple[Node, ...] = tuple(nodes)
        self.index: dict[str, int] = {node.name: i for i, node in enumerate(self.nodes)}
        #: Per node: why it takes no new pod (None: it may); see the module docstring.
        self.closed: list[str | None] = [
            closed_reason(node.health) if health else None for node in self.nodes
        ]
        capacities = [capacity(node.allocatable) for node in self.nodes]
        self.capacity: tuple[Demand, ...] = tuple(capacities)
        self.free_gpu = [c.gpu for c in capacities]
        self.free_cpu = [c.cpu for c in capacities]
        self.free_memory = [c.memory for c in capacities]
        self.free_storage = [c.storage for c in capacities]
        self.free_pods = [c.pods for c in capacities]
        #: Per node, its extended resources (MIG slices, RDMA devices, ...) still free.
        self.free_extended: list[dict[str, int]] = [dict(c.extended) for c in capacities]
        self._histogram_size = max((c.gpu for c in capacities), default=0) + 1
        self.root = self._new_domain("cluster", CLUSTER_ROOT, None)
        self.topology_root = self._new_domain("topology", TOPOLOGY_ROOT, self.root)
        self.unlabelled = self._new_domain("unlabelled", UNLABELLED, self.root)
        #: by_level[i][id] = the domains of level i; by_free_gpu[i][free] = those with that
        #: many free GPUs (the index that yields tightest-fit candidates without a scan).
        self.by_level: list[dict[str, Domain]] = [{} for _ in self.levels]
        self.by_free_gpu: list[dict[int, set[Domain]]] = [{} for _ in self.levels]
        #: Each node's domains, finest first, up to and including the cluster root.
        self.ancestors: list[tuple[Domain, ...]] = [
            self._attach(i, node) for i, node in enumerate(self.nodes)
        ]
        for i in range(len(self.nodes)):
            for domain in self.ancestors[i]:
                self._add_free(domain, i, +1)
        for level, domains in enumerate(self.by_level):
            for domain in domains.values():
                self.by_free_gpu[level].setdefault(domain.free_gpu, set()).add(domain)
        self._eligible: dict[tuple[Any, ...], list[bool]] = {}
        self._scores: dict[NodeAffinity, list[int]] = {}
        self._best_scores: dict[tuple[NodeAffinity, Domain], int] = {}
        self._nodes_of: dict[Domain, tuple[int, ...]] = {}
        self.labelled: list[bool] = [
            self.ancestors[i][0] is not self.unlabelled for i in range(len(self.nodes))
        ]
        #: The level of the pool's NVLink domains, and whether a gang may use a degraded one.
        self.nvlink_level = self.level_of(fabric.nvlink_label) if fabric.nvlink_label else None
        self.partial_domains = fabric.partial_domains
        self.faulty = [health and faulty(node.health) for node in self.nodes]
        for i, is_faulty in enumerate(self.faulty):
            if is_faulty:
                for domain in self.ancestors[i]:
                    domain.faulty += 1

    @classmethod
    def from_nodes(
        cls,
        nodes: Sequence[Node],
        levels: Sequence[str],
        packing: Packing = Packing.BEST_FIT,
        *,
        health: bool = True,
        fabric: FabricRule = NO_FABRIC_RULE,
    ) -> ClusterSnapshot:
        """A snapshot of empty ``nodes`` with a topology over ``levels`` (node labels,
        coarsest first)."""
        return cls(nodes, levels, packing, health=health, fabric=fabric)

    # -- building ---------------------------------------------------------------------------

    def _new_domain(self, domain_id: str, level: int, parent: Domain | None) -> Domain:
        domain = Domain(id=domain_id, level=level, parent=parent)
        domain.gpu_histogram = [0] * self._histogram_size
        if parent is not None:
            parent.children.append(domain)
        return domain

    def _attach(self, i: int, node: Node) -> tuple[Domain, ...]:
        values = [node.labels.get(label) for label in self.levels]
        if any(value is None for value in values):
            leaf = self.unlabelled
        else:
            leaf = self.topology_root
            path: list[Domain] = []
            for level, value in enumerate(values):
                domain_id = f"{leaf.id}.{value}" if level else str(value)
                found = self.by_level[level].get(domain_id)
                if found is None:
                    found = self._new_domain(domain_id, level, leaf)
                    found.path = (*path, found)
                    self.by_level[level][domain_id] = found
                path.append(found)
                leaf = found
        leaf.nodes.append(i)
        chain = [leaf]
        while chain[-1].parent is not None:
            chain.append(chain[-1].parent)
        return tuple(chain)

    def _add_free(self, domain: Domain, i: int, sign: int) -> None:
        """Add (or, with ``sign`` -1, take away) node ``i``'s free capacity to ``domain``'s
        sums: none of it when the node is closed."""
        if self.closed[i] is not None:
            domain.gpu_histogram[0] += sign
            return
        domain.free_gpu += sign * self.free_gpu[i]
        domain.free_cpu += sign * self.free_cpu[i]
        domain.free_memory += sign * self.free_memory[i]
        domain.free_storage += sign * self.free_storage[i]
        domain.gpu_histogram[self.free_gpu[i]] += sign

    # -- queries ----------------------------------------------------------------------------

    def level_of(self, label: str) -> int | None:
        """The index of a level's node label, or None when the topology has no such level."""
        try:
            return self.levels.index(label)
        except ValueError:
            return None

    def eligible(
        self,
        node_selector: Mapping[str, str],
        tolerations: Sequence[Mapping[str, Any]],
        affinity: NodeAffinity = NO_AFFINITY,
    ) -> list[bool]:
        """Per node: does a pod with this nodeSelector, these tolerations and this node
        affinity fit its labels, name and taints. Computed once per distinct (selector,
        tolerations, affinity): labels never change."""
        key = (
            tuple(sorted(node_selector.items())),
            json.dumps(list(tolerations), sort_keys=True),
            affinity,
        )
        found = self._eligible.get(key)
        if found is None:
            found = [belongs_to(node, node_selector, tolerations, affinity) for node in self.nodes]
            self._eligible[key] = found
        return found

    def scores(self, affinity: NodeAffinity) -> list[int] | None:
        """Per node, the weights of the preferred node-affinity terms it matches; None when
        ``affinity`` prefers nothing."""
        if not affinity.preferred:
            return None
        found = self._scores.get(affinity)
        if found is None:
            found = [affinity.score(node.name, node.labels) for node in self.nodes]
            self._scores[affinity] = found
        return found

    def best_score(self, affinity: NodeAffinity, domain: Domain, scores: list[int]) -> int:
        """The highest score (:meth:`scores`) of any node of ``domain``, free or not."""
        key = (affinity, domain)
        found = self._best_scores.get(key)
        if found is None:
            found = max((scores[i] for i in self.nodes_of(domain)), default=0)
            self._best_scores[key] = found
        return found

    def nodes_of(self, domain: Domain) -> tuple[int, ...]:
        """Every node of ``domain`` (the tree never changes: computed once per domain)."""
        found = self._nodes_of.get(domain)
        if found is None:
            nodes: list[int] = []
            stack = [domain]
            while stack:
                current = stack.pop()
                nodes.extend(current.nodes)
                stack.extend(current.children)
            found = self._nodes_of[domain] = tuple(nodes)
        return found

    def fits(self, i: int, demand: Demand) -> bool:
        """Whether a new pod of ``demand`` may go to node ``i`` now."""
        return self.closed[i] is None and self._holds(i, demand)

    def free(self, i: int) -> Demand:
        return Demand(
            self.free_gpu[i],
            self.free_cpu[i],
            self.free_memory[i],
            self.free_storage[i],
            self.free_pods[i],
            tuple(sorted(self.free_extended[i].items())),
        )

    def domains_at(self, level: int, within: Domain) -> Iterator[Domain]:
        """The domains of ``level`` inside ``within``, in no particular order."""
        if within.level < 0:
            yield from self.by_level[level].values()
            return
        stack = [within]
        while stack:
            domain = stack.pop()
            if domain.level == level:
                yield domain
            else:
                stack.extend(domain.children)

    def domain_of(self, node: str, level: int) -> Domain:
        """The domain of ``level`` holding ``node`` (which must carry every level label)."""
        leaf = self.ancestors[self.index[node]][0]
        return leaf.path[level]

    # -- changes ----------------------------------------------------------------------------

    def take(self, i: int, demand: Demand) -> None:
        """Reserve ``demand`` on node ``i``; refuses to over-commit. A closed node still takes
        the pods already bound there (the cache reads them when it starts)."""
        if not self._holds(i, demand):
            raise ValueError(
                f"node {self.nodes[i].name} has {self.free(i)} free, cannot take {demand}"
            )
        self._change(i, -demand.gpu, -demand.cpu, -demand.memory, -demand.storage)
        self.free_pods[i] -= demand.pods
        if demand.extended:
            _add_extended(self.free_extended[i], demand.extended, -1)

    def give_back(self, i: int, demand: Demand) -> None:
        """Return ``demand`` to node ``i``; refuses to exceed its capacity."""
        total = self.capacity[i]
        if (
            self.free_gpu[i] + demand.gpu > total.gpu
            or self.free_cpu[i] + demand.cpu > total.cpu
            or self.free_memory[i] + demand.memory > total.memory
            or self.free_storage[i] + demand.storage > total.storage
            or self.free_pods[i] + demand.pods > total.pods
            or not _extended_fit(dict(total.extended), demand.extended, self.free_extended[i])
        ):
            raise ValueError(f"node {self.nodes[i].name} would have more free than it has")
        self._change(i, demand.gpu, demand.cpu, demand.memory, demand.storage)
        self.free_pods[i] += demand.pods
        if demand.extended:
            _add_extended(self.free_extended[i], demand.extended, +1)

    def _holds(self, i: int, demand: Demand) -> bool:
        """Whether node ``i``'s free capacity holds ``demand``, open or closed."""
        return (
            self.free_gpu[i] >= demand.gpu
            and self.free_cpu[i] >= demand.cpu
            and self.free_memory[i] >= demand.memory
            and self.free_storage[i] >= demand.storage
            and self.free_pods[i] >= demand.pods
            and (not demand.extended or _extended_fit(self.free_extended[i], demand.extended))
        )

    def set_closed(self, node: str, reason: str | None) -> None:
        """Close node ``node`` to new pods (``reason``), or open it again (None)."""
        i = self.index[node]
        if (self.closed[i] is None) == (reason is None):
            self.closed[i] = reason
            return
        self._reweigh(i, -1)
        self.closed[i] = reason
        self._reweigh(i, +1)

    def set_faulty(self, node: str, is_faulty: bool) -> None:
        """Node ``node``'s tray weakens its NVLink domain, or no longer does."""
        i = self.index[node]
        if self.faulty[i] == is_faulty:
            return
        self.faulty[i] = is_faulty
        for domain in self.ancestors[i]:
            domain.faulty += 1 if is_faulty else -1

    def whole_fabric_for(self, required: str | None, members: int) -> bool:
        """Whether a gang of ``members`` pods that must share a domain of level ``required``
        needs an NVLink domain whose fabric is whole (docs/health.md#degraded-domains)."""
        return (
            self.nvlink_level is not None
            and not self.partial_domains
            and members > 1
            and required is not None
            and self.level_of(required) == self.nvlink_level
        )

    def faulty_trays(self, domain: Domain) -> list[str]:
        """The faulty trays of ``domain``, each with why (NotReady, its fabric)."""
        return [
            f"{self.nodes[i].name} {faulty_reason(self.nodes[i].health)}"
            for i in self.nodes_of(domain)
            if self.faulty[i]
        ]

    def degraded(self, domain: Domain) -> bool:
        """Whether ``domain`` is, or lies inside, an NVLink domain with a faulty tray."""
        level = self.nvlink_level
        return level is not None and domain.level >= level and domain.path[level].faulty > 0

    def _reweigh(self, i: int, sign: int) -> None:
        """Take node ``i``'s contribution out of its domains (-1), or put it back (+1)."""
        for domain in self.ancestors[i]:
            indexed = domain.level >= 0
            if indexed:
                self._unindex(domain)
            self._add_free(domain, i, sign)
            if indexed:
                self.by_free_gpu[domain.level].setdefault(domain.free_gpu, set()).add(domain)

    def _unindex(self, domain: Domain) -> None:
        index = self.by_free_gpu[domain.level]
        bucket = index[domain.free_gpu]
        bucket.discard(domain)
        if not bucket:
            del index[domain.free_gpu]

    def _change(self, i: int, gpu: int, cpu: int, memory: int, storage: int) -> None:
        old_gpu = self.free_gpu[i]
        new_gpu = old_gpu + gpu
        self.free_gpu[i] = new_gpu
        self.free_cpu[i] += cpu
        self.free_memory[i] += memory
        self.free_storage[i] += storage
        if self.closed[i] is not None:
            return  # its domains count none of its free capacity
        by_free_gpu = self.by_free_gpu
        for domain in self.ancestors[i]:
            domain.gpu_histogram[old_gpu] -= 1
            domain.gpu_histogram[new_gpu] += 1
            if gpu and domain.level >= 0:
                index = by_free_gpu[domain.level]
                bucket = index[domain.free_gpu]
                bucket.discard(domain)
                if not bucket:
                    del index[domain.free_gpu]
                index.setdefault(domain.free_gpu + gpu, set()).add(domain)
            domain.free_gpu += gpu
            domain.free_cpu += cpu
            domain.free_memory += memory
            domain.free_storage += storage

    def bind(self, bindings: Iterable[Binding]) -> None:
        """Apply a placement (``Placement.bindings``); all or nothing."""
        done: list[Binding] = []
        try:
            for binding in bindings:
                self.take(self.index[binding.node], binding.demand)
                done.append(binding)
        except Exception:
            self.release(done)
            raise

    def release(self, bindings: Iterable[Binding]) -> None:
        """Free what ``bindings`` took (a finished or cancelled group)."""
        for binding in bindings:
            self.give_back(self.index[binding.node], binding.demand)


def _extended_fit(
    free: Mapping[str, int], demand: Extended, already: Mapping[str, int] | None = None
) -> bool:
    """Whether ``free`` holds ``demand`` (plus ``already`` of each resource, when given)."""
    return all(
        free.get(name, 0) >= amount + (already.get(name, 0) if already else 0)
        for name, amount in demand
    )


def _add_extended(free: dict[str, int], demand: Extended, sign: int) -> None:
    for name, amount in demand:
        free[name] = free.get(name, 0) + sign * amount
