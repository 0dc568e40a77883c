"""The embedded backend's scheduling state, kept between ticks: the cluster snapshots with every
bound pod taken, the queues' usage, and the task groups waiting to be placed.

A pass offers waiting groups in fair-share order (``scheduler/fair_share.py``) to the scheduler
and takes what it places in every snapshot at once; releasing a finished group gives its
capacity back. Nothing is rebuilt between ticks, so a pass costs what it places, not what
exists (Kueue's incremental TAS snapshot).

**Shapes.** Waiting groups that ask for the same thing — the same pods' requests, selectors and
tolerations, the same constraints, queue, topology levels and priority class — are placed alike
on one snapshot, or fail alike (the scheduler never orders by pod names). So a pass tries the
first group of each shape in turn, and once one fails, none behind it is tried in that pass; a
shape that failed is not tried again until capacity is given back (the *generation* grows) or
the queues change. Thousands of waiting groups cost a pass a handful of tries. The groups of a
shape share one pending reason (``store/workflows.py``, ``pending_shapes``).

LOW groups are preemptible in OSMO: they neither count against nor are limited by the quota.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from corral.domain.configs.snapshot import State, as_configs
from corral.domain.labels import POOL as POOL_LABEL
from corral.domain.labels import PRIORITY as PRIORITY_LABEL
from corral.domain.labels import QUEUE as QUEUE_LABEL
from corral.domain.platform.nodes import Node
from corral.domain.topology.kai_objects import queue_manifests
from corral.scheduler import Binding, ClusterSnapshot, Pending, Placement, Queue, QueueUsage
from corral.scheduler.fair_share import PRIORITY_RANK, queue_share
from corral.scheduler.gang import place_pod_set
from corral.scheduler.podgroup import GroupError, PodSet, read_pod_group, shape_of
from corral.scheduler.resources import pod_demand

log = structlog.get_logger("corral.placement")

POD_GROUP_KIND = ("scheduling.run.ai/v2alpha2", "PodGroup")


def pool_queues(state: State) -> list[Queue]:
    """The pool queues of every backend, read from the Queue manifests the Kubernetes backend
    syncs (``domain/topology/kai_objects.py``); the parent queues are unlimited and not needed
    here."""
    backends = {pool.backend for pool in as_configs(state).pools().values()}
    return [
        queue_of(manifest)
        for backend in sorted(backends)
        for manifest in queue_manifests(state, backend)
        if POOL_LABEL in manifest["metadata"]["labels"]
    ]


def queue_of(manifest: Mapping[str, Any]) -> Queue:
    """The scheduler's view of a queue manifest (-1 means none / unlimited)."""
    gpu = manifest["spec"]["resources"]["gpu"]
    limit = int(gpu["limit"])
    return Queue(
        manifest["metadata"]["name"],
        gpu_guarantee=max(int(gpu["quota"]), 0),
        gpu_maximum=None if limit < 0 else limit,
        weight=int(gpu["overQuotaWeight"]),
    )


@dataclass(frozen=True)
class BoundPodOnNode:
    """A pod of the embedded cluster bound to a node: what it takes, whose it is."""

    name: str
    node: str
    group_uuid: str | None  # None: not a task group's (no osmo.group_uuid label)
    labels: Mapping[str, str]
    spec: Mapping[str, Any]


@dataclass
class Shape:
    """What the groups of one shape ask for; ``root`` was read from the first of them, so its
    pods carry that group's names."""

    key: str
    root: PodSet | None  # None: the PodGroup cannot be read (``reason`` says why)
    levels: tuple[str, ...]
    queue: str
    low: bool
    #: The generation at which a group of this shape last failed to be placed (-1: never
    #: placeable), and why.
    failed_at: int | None = None
    reason: str | None = None
    #: The reason as the store has it.
    reason_written: str | None = None

    @property
    def pod_names(self) -> tuple[str, ...]:
        return () if self.root is None else tuple(pod.name for pod in self.root.all_pods())


@dataclass(frozen=True)
class WaitingGroup:
    """A task group in SCHEDULING on the embedded cluster."""

    key: str  # the group uuid
    shape: Shape
    #: Its pods' names, in the order of ``shape.root.all_pods()``.
    pod_names: tuple[str, ...]
    priority: str
    age: tuple[Any, ...]  # sorts older groups first

    @property
    def queue(self) -> str:
        return self.shape.queue

    def order(self) -> tuple[int, tuple[Any, ...], str]:
        return (PRIORITY_RANK.get(self.priority, 1), self.age, self.key)


@dataclass(frozen=True)
class Placed:
    group: WaitingGroup
    placement: Placement  # with the group's own pod names


@dataclass
class PassResult:
    placed: list[Placed] = field(default_factory=list)
    #: Shapes whose reason changed in this pass.
    reasons: list[Shape] = field(default_factory=list)
    tries: int = 0


@dataclass
class _BoundGroup:
    bindings: list[Binding]
    charged: dict[str, int]  # queue -> GPUs it counts against


class Placements:
    """See the module docstring."""

    def __init__(
        self, nodes: Sequence[Node], queues: Iterable[Queue], bound: Iterable[BoundPodOnNode]
    ) -> None:
        self.nodes = nodes
        self._names = {node.name for node in nodes}
        self._snapshots: dict[tuple[str, ...], ClusterSnapshot] = {}
        self.usage = QueueUsage(queues)
        #: Grows whenever capacity is given back: shapes that failed before may fit now.
        self.generation = 0
        self._groups: dict[str, _BoundGroup] = {}
        self._external: list[Binding] = []  # bound pods that belong to no task group
        self.waiting: dict[str, WaitingGroup] = {}
        self._shapes: dict[str, Shape] = {}
        #: Per shape: its waiting groups as a heap of (order, group uuid); entries of groups no
        #: longer waiting are dropped when they reach the top.
        self._lines: dict[str, list[tuple[tuple[Any, ...], str]]] = {}
        for pod in bound:
            self._take_existing(pod)

    # -- what is bound ----------------------------------------------------------------------

    def _take_existing(self, pod: BoundPodOnNode) -> None:
        if pod.node not in self._names:
            log.warning("bound pod on an unknown node ignored", pod=pod.name, node=pod.node)
            return
        demand = pod_demand(pod.spec)
        binding = Binding(pod.name, pod.node, demand)
        charged: dict[str, int] = {}
        queue = pod.labels.get(QUEUE_LABEL, "")
        if queue in self.usage.used and pod.labels.get(PRIORITY_LABEL, "").upper() != "LOW":
            self.usage.used[queue] += demand.gpu
            charged[queue] = demand.gpu
        if pod.group_uuid is None:
            self._external.append(binding)
            return
        group = self._groups.setdefault(pod.group_uuid, _BoundGroup([], {}))
        group.bindings.append(binding)
        for name, gpus in charged.items():
            group.charged[name] = group.charged.get(name, 0) + gpus

    def snapshot(self, levels: tuple[str, ...]) -> ClusterSnapshot:
        found = self._snapshots.get(levels)
        if found is None:
            found = ClusterSnapshot.from_nodes(self.nodes, levels)
            everything = [*self._external]
            for group in self._groups.values():
                everything.extend(group.bindings)
            for binding in everything:
                try:
                    found.bind([binding])
                except ValueError:  # the cluster description shrank under a running pod
                    log.warning("bound pod does not fit its node", pod=binding.pod)
            self._snapshots[levels] = found
        return found

    def release(self, group_uuid: str) -> bool:
        """Give back what a finished group took (its pods were deleted); False if it held
        nothing."""
        group = self._groups.pop(group_uuid, None)
        if group is None:
            return False
        for snapshot in self._snapshots.values():
            for binding in group.bindings:
                try:
                    snapshot.release([binding])
                except ValueError:  # it did not fit when the snapshot was built
                    log.warning("released pod was not taken", pod=binding.pod)
        for queue, gpus in group.charged.items():
            self.usage.refund(queue, min(gpus, self.usage.used.get(queue, 0)))
        self.generation += 1
        return True

    # -- what waits -------------------------------------------------------------------------

    def add(
        self,
        group_uuid: str,
        manifests: Sequence[Mapping[str, Any]],
        *,
        levels: tuple[str, ...],
        priority: str,
        age: tuple[Any, ...],
    ) -> WaitingGroup:
        """Wait to place the group whose objects are ``manifests``."""
        pods = [m for m in manifests if m["kind"] == "Pod"]
        pod_group = _pod_group(manifests)
        if pod_group is None:
            # The default scheduler has no gangs; placing the pods together still keeps a
            # group from starting half-way, which is what its tasks expect of each other.
            pod_group = {"spec": {"minMember": len(pods)}}
        queue = str((pod_group.get("spec") or {}).get("queue") or "")
        low = priority == "LOW"
        try:
            root: PodSet | None = read_pod_group(pod_group, pods)
            error = None
        except GroupError as err:
            root, error = None, str(err)
        if root is None:
            shape = Shape(shape_of(PodSet(group_uuid, None)), None, levels, queue, low)
            shape.reason, shape.failed_at = error, -1
            names: tuple[str, ...] = ()
        else:
            key = shape_of(root, list(levels), queue, low)
            shape = self._shapes.setdefault(key, Shape(key, root, levels, queue, low))
            names = tuple(pod.name for pod in root.all_pods())
        waiting = WaitingGroup(group_uuid, shape, names, priority, age)
        self.waiting[group_uuid] = waiting
        heapq.heappush(self._lines.setdefault(shape.key, []), (waiting.order(), group_uuid))
        return waiting

    def drop(self, group_uuid: str) -> None:
        """The group no longer waits (placed elsewhere, canceled, timed out)."""
        self.waiting.pop(group_uuid, None)

    # -- a pass -----------------------------------------------------------------------------

    def place_waiting(self) -> PassResult:
        """Offer the waiting groups in fair-share order (queues by their share at the start of
        the pass, then priority, then age); see the module docstring for shapes."""
        result = PassResult()
        shapes = {key: self._shape(key, line) for key, line in list(self._lines.items())}
        share = {
            shape.queue: queue_share(self.usage, shape.queue)
            for shape in shapes.values()
            if shape is not None
        }
        heads: list[tuple[tuple[Any, ...], str]] = []
        for key, shape in shapes.items():
            if shape is not None and shape.failed_at not in (self.generation, -1):
                heapq.heappush(heads, ((share[shape.queue], *self._lines[key][0][0]), key))
        while heads:
            _, key = heapq.heappop(heads)
            line = self._lines[key]
            group = self.waiting[line[0][1]]
            shape = group.shape
            result.tries += 1
            outcome = self._try(group)
            if isinstance(outcome, Pending):
                shape.failed_at, shape.reason = self.generation, outcome.reason
                continue
            heapq.heappop(line)
            self.drop(group.key)
            result.placed.append(Placed(group, outcome))
            if self._shape(key, line) is not None:
                heapq.heappush(heads, ((share[shape.queue], *line[0][0]), key))
        for shape in shapes.values():
            if shape is not None and shape.reason != shape.reason_written:
                shape.reason_written = shape.reason
                result.reasons.append(shape)
        return result

    def _shape(self, key: str, line: list[tuple[tuple[Any, ...], str]]) -> Shape | None:
        """The shape of the line, once entries of groups that no longer wait are dropped from
        its head; None (and the line forgotten) when it is empty."""
        while line and line[0][1] not in self.waiting:
            heapq.heappop(line)
        if not line:
            del self._lines[key]
            self._shapes.pop(key, None)
            return None
        return self.waiting[line[0][1]].shape

    def _try(self, group: WaitingGroup) -> Placement | Pending:
        shape = group.shape
        assert shape.root is not None
        queues = None if shape.low else self.usage
        result = place_pod_set(self.snapshot(shape.levels), shape.root, shape.queue, queues)
        if isinstance(result, Pending):
            return result
        own = dict(zip(shape.pod_names, group.pod_names, strict=True))
        bindings = tuple(Binding(own[b.pod], b.node, b.demand) for b in result.bindings)
        placement = Placement(
            bindings,
            result.domains,
            tuple(own[name] for name in result.unplaced),
            result.queue,
        )
        self._take(group.key, placement, charge=not shape.low)
        return placement

    def _take(self, group_uuid: str, placement: Placement, *, charge: bool) -> None:
        for snapshot in self._snapshots.values():
            snapshot.bind(placement.bindings)
        charged: dict[str, int] = {}
        if charge and placement.queue in self.usage.used:
            self.usage.used[placement.queue] += placement.gpus
            charged[placement.queue] = placement.gpus
        self._groups[group_uuid] = _BoundGroup(list(placement.bindings), charged)


def _pod_group(manifests: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return next((m for m in manifests if (m["apiVersion"], m["kind"]) == POD_GROUP_KIND), None)
