"""The embedded scheduler's cache: the state kept between ticks (Kueue's cache, KAI's cluster
info). It holds the cluster snapshots with every bound pod taken, the queues' usage, the index of
preemptible victims, and the task groups waiting to be placed, grouped by *shape*. A pass over
it is ``cycle.py``; releasing a finished group gives its capacity back. Nothing is rebuilt
between ticks, so a pass costs what it places, not what exists (Kueue's incremental TAS
snapshot).

**Shapes.** Waiting groups that ask for the same thing — the same pods' requests, selectors and
tolerations, the same constraints, queue, topology levels and priority class — are placed alike
on one snapshot, or fail alike (the scheduler never orders by pod names). Each shape has a
*line*: its waiting groups in priority and age order. A shape that failed is not tried again
until capacity is given back (the *generation* grows) or, for a group that may evict, new
preemptible work is bound (the *victim generation*).

**Victims** (``preemption.py``): bound LOW gangs are kept in bind order (youngest last) and
indexed by node, so a search starts from the youngest victims and visits a region's nodes only.
Work younger than its queue's ``min_runtime`` is never a victim.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog

from corral.domain.labels import PRIORITY as PRIORITY_LABEL
from corral.domain.labels import QUEUE as QUEUE_LABEL
from corral.domain.platform.node_health import HEALTHY, NodeHealth, closed_reason, faulty
from corral.domain.platform.nodes import Node
from corral.domain.topology.fabric import NO_FABRIC_RULE, FabricRule
from corral.domain.topology.podgroup import pod_group_of
from corral.scheduler import Binding, ClusterSnapshot, Placement, Queue, QueueUsage
from corral.scheduler.podgroup import GroupError, PodSet, read_pod_group, shape_of
from corral.scheduler.records import (
    NEVER,
    BoundPodOnNode,
    Shape,
    WaitingGroup,
)
from corral.scheduler.resources import pod_demand
from corral.scheduler.running import PREEMPTIBLE, Running
from corral.scheduler.victims import Candidates, VictimIndex

log = structlog.get_logger("corral.scheduler")


@dataclass
class BoundGroup:
    bindings: list[Binding]
    queue: str
    preemptible: bool
    charged: int = 0  # GPUs counted against the queue


@dataclass
class Unbound:
    """What :meth:`SchedulerCache.unbind` took out, to put it back exactly."""

    key: str
    group: BoundGroup
    victim: Running | None
    checkpoint: datetime | None
    generations: tuple[int, int]  # the cache's and the victim index's, before
    queue_counts: tuple[int, int] | None  # the queue's used and deserved GPUs, before
    #: (snapshot key, pod) of bindings that did not fit when that snapshot was built.
    not_taken: set[tuple[Any, str]] = dataclasses.field(default_factory=set)


class SchedulerCache:
    """See the module docstring."""

    def __init__(
        self,
        nodes: Sequence[Node],
        queues: Iterable[Queue],
        bound: Iterable[BoundPodOnNode],
        *,
        bound_at: Mapping[str, datetime] | None = None,
        min_runtime: Mapping[str, timedelta] | None = None,
    ) -> None:
        self.nodes = list(nodes)
        self._followed: Sequence[Node] = nodes
        self._index = {node.name: i for i, node in enumerate(nodes)}
        self._snapshots: dict[tuple[tuple[str, ...], FabricRule], ClusterSnapshot] = {}
        self.usage = QueueUsage(queues)
        #: Per queue, how long its work is protected from eviction.
        self.min_runtime = dict(min_runtime or {})
        #: Grows whenever capacity is given back: shapes that failed before may fit now.
        self.generation = 0
        self._groups: dict[str, BoundGroup] = {}
        #: Per node name, the groups bound there.
        self._groups_on: dict[str, set[str]] = {}
        #: The nodes whose health is not :data:`HEALTHY`: where running work may have to end.
        self.unhealthy = {node.name: node.health for node in nodes if node.health != HEALTHY}
        self._external: list[Binding] = []  # bound pods that belong to no task group
        self._external_nodes: set[str] = set()
        #: Bound preemptible gangs in bind order (youngest last), and by node index.
        self.victim_index = VictimIndex(self._index)
        #: Per bound group, when it last reported a committed checkpoint (what an eviction
        #: would lose is counted from it: ``preemption.lost_work``).
        self.checkpoints: dict[str, datetime] = {}
        #: The keys of ``checkpoints``, latest first (None: to be sorted again after a report).
        self._freshest: deque[str] | None = None
        #: The keys :meth:`freshest` dropped from its head since it was sorted.
        self._dropped_from_freshest: set[str] = set()
        self.waiting: dict[str, WaitingGroup] = {}
        self._shapes: dict[str, Shape] = {}
        #: Per shape: its waiting groups as a heap of (order, group uuid); entries of groups no
        #: longer waiting are dropped when they reach the top.
        self.lines: dict[str, list[tuple[tuple[Any, ...], str]]] = {}
        for pod in bound:
            self._take_existing(pod)
        self._index_existing_victims(bound_at or {})

    # -- what is bound ----------------------------------------------------------------------

    def _take_existing(self, pod: BoundPodOnNode) -> None:
        if pod.node not in self._index:
            log.warning("bound pod on an unknown node ignored", pod=pod.name, node=pod.node)
            return
        demand = pod.demand or pod_demand(pod.spec)
        binding = Binding(pod.name, pod.node, demand)
        queue = pod.labels.get(QUEUE_LABEL, "")
        preemptible = pod.labels.get(PRIORITY_LABEL, "").upper() == PREEMPTIBLE
        charged = 0
        if queue in self.usage.used:
            self.usage.count(queue, demand.gpu, preemptible=preemptible)
            charged = demand.gpu
        if pod.group_uuid is None:
            self._external.append(binding)
            self._external_nodes.add(binding.node)
            return
        group = self._groups.setdefault(pod.group_uuid, BoundGroup([], queue, preemptible))
        group.bindings.append(binding)
        group.charged += charged
        self._groups_on.setdefault(binding.node, set()).add(pod.group_uuid)

    def _index_existing_victims(self, bound_at: Mapping[str, datetime]) -> None:
        """The preemptible gangs read at start, oldest first (unknown bind times first)."""
        preemptible = [key for key, group in self._groups.items() if group.preemptible]
        known = sorted((key for key in preemptible if key in bound_at), key=bound_at.__getitem__)
        for key in [*(key for key in preemptible if key not in bound_at), *known]:
            self._add_victim(key, bound_at.get(key))

    def _add_victim(self, key: str, since: datetime | None) -> None:
        group = self._groups[key]
        self.victim_index.add(key, tuple(group.bindings), group.queue, since)

    @property
    def victim_generation(self) -> int:
        """Grows whenever preemptible work is bound: a failed preemption may succeed now."""
        return self.victim_index.generation

    def snapshot(
        self, levels: tuple[str, ...], fabric: FabricRule = NO_FABRIC_RULE
    ) -> ClusterSnapshot:
        found = self._snapshots.get((levels, fabric))
        if found is None:
            found = ClusterSnapshot.from_nodes(self.nodes, levels, fabric=fabric)
            everything = [*self._external]
            for group in self._groups.values():
                everything.extend(group.bindings)
            for binding in everything:
                try:
                    found.bind([binding])
                except ValueError:  # the cluster description shrank under a running pod
                    log.warning("bound pod does not fit its node", pod=binding.pod)
            self._snapshots[(levels, fabric)] = found
        return found

    def follow_health(self, nodes: Sequence[Node]) -> None:
        """Take the health of ``nodes`` (the same nodes, read again) where it changed."""
        if nodes is self._followed:
            return
        for node in nodes:
            i = self._index.get(node.name)
            if i is not None and self.nodes[i].health != node.health:
                self.set_health(node.name, node.health)
        self._followed = nodes

    def set_health(self, name: str, health: NodeHealth) -> None:
        """Node ``name``'s health changed: from now on it takes new pods, or none
        (``domain/platform/node_health.py``); what runs there keeps what it holds."""
        i = self._index[name]
        self.nodes[i] = dataclasses.replace(self.nodes[i], health=health)
        if health == HEALTHY:
            self.unhealthy.pop(name, None)
        else:
            self.unhealthy[name] = health
        reason = closed_reason(health)
        for snapshot in self._snapshots.values():
            snapshot.set_closed(name, reason)
            snapshot.set_faulty(name, faulty(health))
        if reason is None or not faulty(health):
            self.generation += 1  # capacity or a whole fabric came back: a shape may fit now

    def release(self, group_uuid: str) -> bool:
        """Give back what a finished (or evicted) group took; False if it held nothing."""
        return self.unbind(group_uuid) is not None

    def unbind(self, group_uuid: str) -> Unbound | None:
        """:meth:`release`, answering what it takes to bind the group again exactly as it
        was (:meth:`rebind`, for ``statement.py``); None if it held nothing."""
        group = self._groups.pop(group_uuid, None)
        if group is None:
            return None
        unbound = Unbound(
            group_uuid,
            group,
            self.victim_index.drop(group_uuid),
            self.checkpoints.pop(group_uuid, None),
            (self.generation, self.victim_index.generation),
            self.usage.counts(group.queue),
        )
        for binding in group.bindings:
            self._groups_on.get(binding.node, set()).discard(group_uuid)
        for levels, snapshot in self._snapshots.items():
            index = snapshot.index
            for binding in group.bindings:
                try:
                    snapshot.give_back(index[binding.node], binding.demand)
                except ValueError:  # it did not fit when the snapshot was built
                    log.warning("released pod was not taken", pod=binding.pod)
                    unbound.not_taken.add((levels, binding.pod))
        if group.charged:
            self.usage.refund(group.queue, group.charged, preemptible=group.preemptible)
        self.generation += 1
        return unbound

    def rebind(self, unbound: Unbound) -> None:
        """Bind again a group :meth:`unbind` took out, exactly as it was: in every snapshot
        (but one it did not fit when that snapshot was built), its queue's counts, its place
        among the victims, its checkpoint and the generations."""
        key, group = unbound.key, unbound.group
        self._groups[key] = group
        for binding in group.bindings:
            self._groups_on.setdefault(binding.node, set()).add(key)
        not_taken = unbound.not_taken
        for levels, snapshot in self._snapshots.items():
            if not_taken:
                snapshot.bind(b for b in group.bindings if (levels, b.pod) not in not_taken)
            else:
                snapshot.bind(group.bindings)
        if unbound.queue_counts is not None:
            self.usage.restore(group.queue, unbound.queue_counts)
        if unbound.victim is not None:
            self.victim_index.put_back(unbound.victim)
        if unbound.checkpoint is not None:
            self.checkpoints[key] = unbound.checkpoint
            if key in self._dropped_from_freshest:
                self._freshest = None  # dropped from its head meanwhile: sorted again
        self.generation, self.victim_index.generation = unbound.generations

    def checkpoint(self, group_uuid: str, at: datetime) -> None:
        """Record that bound group ``group_uuid`` committed a checkpoint at ``at`` (the latest
        of its reports counts; a group not bound is ignored)."""
        if group_uuid in self._groups:
            before = self.checkpoints.get(group_uuid)
            self.checkpoints[group_uuid] = at if before is None else max(before, at)
            self._freshest = None

    def freshest(self) -> deque[str]:
        """The groups that reported checkpoints, the latest first (sorted again only after
        a report; released ones are dropped from the head, where evictions take them)."""
        if self._freshest is None:
            marks = self.checkpoints
            # latest first; equal times by key, so the order never depends on report order
            self._freshest = deque(sorted(marks, key=lambda k: (marks[k], k), reverse=True))
            self._dropped_from_freshest.clear()
        while self._freshest and self._freshest[0] not in self.checkpoints:
            self._dropped_from_freshest.add(self._freshest.popleft())
        return self._freshest

    def bound_groups(self) -> Iterator[tuple[str, tuple[Binding, ...], str, bool]]:
        """Each bound group: its key, bindings, queue, and whether it is preemptible."""
        for key, group in self._groups.items():
            yield key, tuple(group.bindings), group.queue, group.preemptible

    @property
    def external(self) -> tuple[Binding, ...]:
        """Bound pods of no task group (they hold their nodes until they end)."""
        return tuple(self._external)

    def groups_on(self, node: str) -> list[str]:
        """The groups bound to ``node``, in uuid order."""
        return sorted(self._groups_on.get(node, ()))

    def nodes_of(self, group_uuid: str) -> set[str]:
        """The nodes the bound group holds (none when it holds nothing)."""
        group = self._groups.get(group_uuid)
        return {b.node for b in group.bindings} if group is not None else set()

    def holds_anything(self, node: str) -> bool:
        """Whether a group or a pod of no group is bound to ``node``."""
        return bool(self._groups_on.get(node)) or node in self._external_nodes

    def gpus_of(self, group_uuid: str) -> int:
        """The GPUs the bound group holds."""
        group = self._groups.get(group_uuid)
        return sum(b.demand.gpu for b in group.bindings) if group is not None else 0

    # -- what waits -------------------------------------------------------------------------

    def add(
        self,
        group_uuid: str,
        manifests: Sequence[Mapping[str, Any]],
        *,
        levels: tuple[str, ...],
        priority: str,
        age: tuple[Any, ...],
        fabric: FabricRule = NO_FABRIC_RULE,
    ) -> WaitingGroup:
        """Wait to place the group whose objects are ``manifests``."""
        return self.add_read(group_uuid, read_group(manifests), levels, priority, age, fabric)

    def add_read(
        self,
        group_uuid: str,
        read: ReadGroup,
        levels: tuple[str, ...],
        priority: str,
        age: tuple[Any, ...],
        fabric: FabricRule = NO_FABRIC_RULE,
    ) -> WaitingGroup:
        """:meth:`add` for objects already read (a forecast reads each group once for all
        of its runs: placing never changes a :class:`PodSet`)."""
        root, error, queue = read.root, read.error, read.queue
        low = priority == "LOW"
        if root is None:
            shape = Shape(shape_of(PodSet(group_uuid, None)), None, levels, queue, low, fabric)
            shape.reason, shape.failed_at = error, NEVER
            names: tuple[str, ...] = ()
        else:
            key = shape_of(root, [*levels, repr(fabric)], queue, low)
            shape = self._shapes.setdefault(key, Shape(key, root, levels, queue, low, fabric))
            names = tuple(pod.name for pod in root.all_pods())
        waiting = WaitingGroup(group_uuid, shape, names, priority, age)
        self.waiting[group_uuid] = waiting
        heapq.heappush(self.lines.setdefault(shape.key, []), (waiting.order(), group_uuid))
        return waiting

    def drop(self, group_uuid: str) -> None:
        """The group no longer waits (placed elsewhere, canceled, timed out)."""
        self.waiting.pop(group_uuid, None)

    def line_shape(self, key: str) -> Shape | None:
        """The shape of line ``key``, once entries of groups that no longer wait are dropped
        from its head; None (and the line forgotten) when it is empty."""
        line = self.lines[key]
        while line and line[0][1] not in self.waiting:
            heapq.heappop(line)
        if not line:
            del self.lines[key]
            self._shapes.pop(key, None)
            return None
        return self.waiting[line[0][1]].shape

    def stamp(self, group: WaitingGroup) -> tuple[int, ...]:
        """What must change for a failed shape to be worth another try: capacity given back,
        and for a group that may evict, new preemptible work bound."""
        if group.priority == PREEMPTIBLE:
            return (self.generation,)
        return (self.generation, self.victim_generation)

    # -- what is placed and who may be evicted ----------------------------------------------

    @property
    def has_victims(self) -> bool:
        return len(self.victim_index) > 0

    def victims(self, now: datetime | None, placed_now: Set[str]) -> Candidates:
        """The victims a preemption may take at ``now``, none of ``placed_now``."""
        return Candidates(
            self.victim_index,
            self.checkpoints,
            lambda: iter(self.freshest()),
            self.protected_until,
            now,
            placed_now,
        )

    def protected_until(self, victim: Running, now: datetime | None) -> datetime | None:
        """When ``victim`` may be evicted, while that is still ahead; None: it may be now."""
        minimum = self.min_runtime.get(victim.queue)
        since = victim.since[0]
        if not minimum or now is None or since is None:
            return None
        until: datetime = since + minimum
        return until if until > now else None

    def take(
        self,
        group_uuid: str,
        placement: Placement,
        *,
        preemptible: bool,
        now: datetime | None = None,
    ) -> None:
        """Bind ``placement`` in every snapshot and charge its queue; all or nothing
        (ValueError: its queue's limits refuse it, or a node cannot hold it)."""
        charged = 0
        queue = placement.queue
        if queue in self.usage.used:
            self.usage.charge(queue, placement.gpus, preemptible=preemptible)
            charged = placement.gpus
        bound: list[ClusterSnapshot] = []
        try:
            for snapshot in self._snapshots.values():
                snapshot.bind(placement.bindings)
                bound.append(snapshot)
        except ValueError:
            for snapshot in bound:
                snapshot.release(placement.bindings)
            if charged:
                self.usage.refund(queue, charged, preemptible=preemptible)
            raise
        self._groups[group_uuid] = BoundGroup(list(placement.bindings), queue, preemptible, charged)
        for binding in placement.bindings:
            self._groups_on.setdefault(binding.node, set()).add(group_uuid)
        if preemptible:
            self._add_victim(group_uuid, now)


@dataclass(frozen=True)
class ReadGroup:
    """A group's PodGroup and pods as the scheduler reads them (None and why: unreadable)."""

    root: PodSet | None
    error: str | None
    queue: str


def read_group(manifests: Sequence[Mapping[str, Any]]) -> ReadGroup:
    pods = [m for m in manifests if m["kind"] == "Pod"]
    pod_group = pod_group_of(manifests)
    if pod_group is None:
        # The default scheduler has no gangs; placing the pods together still keeps a
        # group from starting half-way, which is what its tasks expect of each other.
        pod_group = {"spec": {"minMember": len(pods)}}
    queue = str((pod_group.get("spec") or {}).get("queue") or "")
    try:
        return ReadGroup(read_pod_group(pod_group, pods), None, queue)
    except GroupError as err:
        return ReadGroup(None, str(err), queue)
