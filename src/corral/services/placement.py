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
shape share one pending reason (``store/workflows.py``, ``pending_shapes``). The records a pass
works on are ``placement_records.py``; the queues come from ``pool_queues.py``.

**Queues and preemption** (``scheduler/queues.py``, ``scheduler/preemption.py``): every group
counts against its queue's maximum; HIGH and NORMAL groups also against its guarantee, LOW
groups (preemptible) may borrow above it. A HIGH or NORMAL group that does not fit may evict
LOW gangs of its own queue, or of queues that borrow, when the simulated placement then
succeeds: the pass releases the victims, binds the preemptor and reports both
(:class:`Evicted`). Bound LOW gangs are kept in bind order (youngest last) and indexed by node,
so a search starts from the youngest victims and visits a region's nodes only. Work younger than
its pool's ``preemption.min_runtime`` is never a victim.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog

from corral.domain.labels import PRIORITY as PRIORITY_LABEL
from corral.domain.labels import QUEUE as QUEUE_LABEL
from corral.domain.platform.nodes import Node
from corral.scheduler import Binding, ClusterSnapshot, Pending, Placement, Queue, QueueUsage
from corral.scheduler.explain import explain_pending
from corral.scheduler.fair_share import queue_share
from corral.scheduler.gang import UNEXPLAINED, place_pod_set
from corral.scheduler.podgroup import GroupError, PodSet, read_pod_group, shape_of
from corral.scheduler.preemption import PREEMPTIBLE, Preemption, Running, preempt
from corral.scheduler.resources import pod_demand
from corral.services.placement_records import (
    NEVER,
    BoundPodOnNode,
    Evicted,
    PassResult,
    Placed,
    Shape,
    WaitingGroup,
)

log = structlog.get_logger("corral.placement")

POD_GROUP_KIND = ("scheduling.run.ai/v2alpha2", "PodGroup")


@dataclass
class _BoundGroup:
    bindings: list[Binding]
    queue: str
    preemptible: bool
    charged: int = 0  # GPUs counted against the queue


class Placements:
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
        self.nodes = nodes
        self._index = {node.name: i for i, node in enumerate(nodes)}
        self._snapshots: dict[tuple[str, ...], ClusterSnapshot] = {}
        self.usage = QueueUsage(queues)
        #: Per queue, how long its work is protected from eviction.
        self.min_runtime = dict(min_runtime or {})
        #: Grows whenever capacity is given back: shapes that failed before may fit now.
        self.generation = 0
        #: Grows whenever preemptible work is bound: a failed preemption may succeed now.
        self.victim_generation = 0
        self._groups: dict[str, _BoundGroup] = {}
        self._external: list[Binding] = []  # bound pods that belong to no task group
        #: Bound preemptible gangs in bind order (youngest last), and by node index.
        self._victims: dict[str, Running] = {}
        self._victims_on: dict[int, dict[str, Running]] = {}
        self._bind_order = itertools.count()
        #: Groups placed in the current pass: never victims in it.
        self._placed_now: set[str] = set()
        self.waiting: dict[str, WaitingGroup] = {}
        self._shapes: dict[str, Shape] = {}
        #: Per shape: its waiting groups as a heap of (order, group uuid); entries of groups no
        #: longer waiting are dropped when they reach the top.
        self._lines: dict[str, list[tuple[tuple[Any, ...], str]]] = {}
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
            return
        group = self._groups.setdefault(pod.group_uuid, _BoundGroup([], queue, preemptible))
        group.bindings.append(binding)
        group.charged += charged

    def _index_existing_victims(self, bound_at: Mapping[str, datetime]) -> None:
        """The preemptible gangs read at start, oldest first (unknown bind times first)."""
        preemptible = [key for key, group in self._groups.items() if group.preemptible]
        known = sorted((key for key in preemptible if key in bound_at), key=bound_at.__getitem__)
        for key in [*(key for key in preemptible if key not in bound_at), *known]:
            self._add_victim(key, bound_at.get(key))

    def _add_victim(self, key: str, since: datetime | None) -> None:
        group = self._groups[key]
        victim = Running(
            key,
            tuple(group.bindings),
            group.queue,
            PREEMPTIBLE,
            (since, next(self._bind_order)),
        )
        self._victims[key] = victim
        for binding in group.bindings:
            self._victims_on.setdefault(self._index[binding.node], {})[key] = victim
        self.victim_generation += 1

    def _drop_victim(self, key: str) -> None:
        victim = self._victims.pop(key, None)
        if victim is None:
            return
        for binding in victim.bindings:
            on_node = self._victims_on.get(self._index[binding.node])
            if on_node is not None:
                on_node.pop(key, None)

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
        """Give back what a finished (or evicted) group took; False if it held nothing."""
        group = self._groups.pop(group_uuid, None)
        if group is None:
            return False
        self._drop_victim(group_uuid)
        for snapshot in self._snapshots.values():
            for binding in group.bindings:
                try:
                    snapshot.release([binding])
                except ValueError:  # it did not fit when the snapshot was built
                    log.warning("released pod was not taken", pod=binding.pod)
        if group.charged:
            self.usage.refund(group.queue, group.charged, preemptible=group.preemptible)
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
            shape.reason, shape.failed_at = error, NEVER
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

    def place_waiting(self, now: datetime | None = None) -> PassResult:
        """Offer the waiting groups in fair-share order (queues by their share at the start of
        the pass, then priority, then age); see the module docstring for shapes. ``now``
        decides which running work is still protected by its queue's minimum runtime (None:
        none is)."""
        result = PassResult()
        self._placed_now = set()
        shapes = {key: self._shape(key, line) for key, line in list(self._lines.items())}
        share = {
            shape.queue: queue_share(self.usage, shape.queue)
            for shape in shapes.values()
            if shape is not None
        }
        heads: list[tuple[tuple[Any, ...], str]] = []
        for key, shape in shapes.items():
            if shape is not None and self._may_try(shape, key, now):
                heapq.heappush(heads, ((share[shape.queue], *self._lines[key][0][0]), key))
        while heads:
            _, key = heapq.heappop(heads)
            line = self._lines[key]
            group = self.waiting[line[0][1]]
            shape = group.shape
            result.tries += 1
            outcome = self._try(group, now)
            if isinstance(outcome, Pending):
                preemption = self._try_preempting(group, now)
                if preemption is None:
                    shape.failed_at, shape.reason = self._stamp(group), self._why(group, outcome)
                    continue
                outcome = self._evict_for(group, preemption, result, now)
            heapq.heappop(line)
            self.drop(group.key)
            self._placed_now.add(group.key)
            result.placed.append(Placed(group, outcome))
            if self._shape(key, line) is not None:
                heapq.heappush(heads, ((share[shape.queue], *line[0][0]), key))
        for shape in shapes.values():
            if shape is not None and shape.reason != shape.reason_written:
                shape.reason_written = shape.reason
                result.reasons.append(shape)
        return result

    def _stamp(self, group: WaitingGroup) -> tuple[int, ...]:
        """What must change for a failed shape to be worth another try: capacity given back,
        and for a group that may evict, new preemptible work bound."""
        if group.priority == PREEMPTIBLE:
            return (self.generation,)
        return (self.generation, self.victim_generation)

    def _may_try(self, shape: Shape, key: str, now: datetime | None) -> bool:
        if shape.failed_at == NEVER:
            return False
        head = self.waiting[self._lines[key][0][1]]
        if shape.failed_at != self._stamp(head):
            return True
        retry = shape.retry_at
        return retry is not None and now is not None and now >= retry

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

    def _try(self, group: WaitingGroup, now: datetime | None) -> Placement | Pending:
        shape = group.shape
        assert shape.root is not None
        result = place_pod_set(
            self.snapshot(shape.levels),
            shape.root,
            shape.queue,
            self.usage,
            preemptible=shape.low,
            explain=shape.low,  # HIGH and NORMAL may evict: explained only if they wait
        )
        if isinstance(result, Pending):
            return result
        placement = self._own(group, result)
        self._take(group.key, placement, preemptible=shape.low, now=now)
        return placement

    def _why(self, group: WaitingGroup, pending: Pending) -> str:
        """The reason ``group`` waits (worked out now when the first try did not)."""
        shape = group.shape
        if pending is not UNEXPLAINED or shape.root is None:
            return pending.reason
        return explain_pending(self.snapshot(shape.levels), shape.root)

    def _own(self, group: WaitingGroup, found: Placement) -> Placement:
        """``found`` (placed with the pod names of the shape's first group) with the group's
        own pod names."""
        own = dict(zip(group.shape.pod_names, group.pod_names, strict=True))
        return Placement(
            tuple(Binding(own[b.pod], b.node, b.demand) for b in found.bindings),
            found.domains,
            tuple(own[name] for name in found.unplaced),
            found.queue,
        )

    # -- preemption -------------------------------------------------------------------------

    def _try_preempting(self, group: WaitingGroup, now: datetime | None) -> Preemption | None:
        """Victims for ``group`` (HIGH or NORMAL) and where it then goes, or None. Records on
        the shape when protected work may become a victim (its minimum runtime over)."""
        shape = group.shape
        shape.retry_at = None
        if shape.low or shape.root is None or not self._victims:
            return None
        candidates = _Candidates(self, now)
        found = preempt(
            self.snapshot(shape.levels),
            shape.root,
            shape.queue,
            group.priority,
            self.usage,
            candidates,
        )
        if found is None and candidates.protected_until:
            shape.retry_at = min(candidates.protected_until)
        return found

    def _protected_until(self, victim: Running, now: datetime | None) -> datetime | None:
        """When ``victim`` may be evicted, while that is still ahead; None: it may be now."""
        minimum = self.min_runtime.get(victim.queue)
        since = victim.since[0]
        if not minimum or now is None or since is None:
            return None
        until: datetime = since + minimum
        return until if until > now else None

    def _evict_for(
        self,
        group: WaitingGroup,
        preemption: Preemption,
        result: PassResult,
        now: datetime | None,
    ) -> Placement:
        """Release the victims, bind ``group`` where the simulation put it."""
        for victim in preemption.victims:
            self.release(victim.key)
            result.evicted.append(
                Evicted(
                    victim.key,
                    group.key,
                    group.queue,
                    reclaimed=victim.queue != group.queue,
                    gpus=victim.gpus,
                )
            )
        placement = self._own(group, preemption.placement)
        self._take(group.key, placement, preemptible=group.shape.low, now=now)
        return placement

    def _take(
        self,
        group_uuid: str,
        placement: Placement,
        *,
        preemptible: bool,
        now: datetime | None = None,
    ) -> None:
        for snapshot in self._snapshots.values():
            snapshot.bind(placement.bindings)
        charged = 0
        queue = placement.queue
        if queue in self.usage.used:
            self.usage.charge(queue, placement.gpus, preemptible=preemptible)
            charged = placement.gpus
        self._groups[group_uuid] = _BoundGroup(
            list(placement.bindings), queue, preemptible, charged
        )
        if preemptible:
            self._add_victim(group_uuid, now)


def _pod_group(manifests: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return next((m for m in manifests if (m["apiVersion"], m["kind"]) == POD_GROUP_KIND), None)


class _Candidates:
    """The victims a preemption may take (:class:`corral.scheduler.preemption.Victims`) from
    the pass's index: not placed in this pass, and past their queue's minimum runtime. Notes
    when the protected ones become candidates."""

    def __init__(self, placements: Placements, now: datetime | None) -> None:
        self._placements = placements
        self._now = now
        self.protected_until: list[datetime] = []

    def unprotected(self) -> Iterator[Running]:
        placements = self._placements
        for victim in reversed(placements._victims.values()):  # youngest first
            if victim.key in placements._placed_now:
                continue  # placed in this pass: it has not even started
            until = placements._protected_until(victim, self._now)
            if until is None:
                yield victim
            else:
                self.protected_until.append(until)

    def on_node(self, node: int) -> list[Running]:
        placements = self._placements
        return [
            victim
            for victim in placements._victims_on.get(node, {}).values()
            if victim.key not in placements._placed_now
            and placements._protected_until(victim, self._now) is None
        ]
