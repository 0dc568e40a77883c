"""One scheduling pass over the cache (``cache.py``): offer the waiting groups in fair-share
order (``fair_share.py``), bind what fits in every snapshot at once, and report what was placed,
what was evicted for it and which shapes' reasons changed (:class:`PassResult`).

A pass tries the first group of each shape in turn; once one fails, none behind it is tried in
that pass. Thousands of waiting groups cost a pass a handful of tries.

**Queues and preemption** (``queues.py``, ``preemption.py``): every group counts against its
queue's maximum; HIGH and NORMAL groups also against its guarantee, LOW groups (preemptible) may
borrow above it. A HIGH or NORMAL group that does not fit may evict LOW gangs of its own queue,
or of queues that borrow, when the simulated placement then succeeds: the pass releases the
victims, binds the preemptor and reports both (:class:`Evicted`).
"""

from __future__ import annotations

import heapq
from datetime import datetime
from typing import Any

from corral.scheduler.cache import SchedulerCache
from corral.scheduler.explain import explain_pending
from corral.scheduler.fair_share import queue_share
from corral.scheduler.gang import UNEXPLAINED, Pending, Placement, place_pod_set
from corral.scheduler.preemption import preempt
from corral.scheduler.records import (
    NEVER,
    Evicted,
    PassResult,
    Placed,
    Preemption,
    Shape,
    WaitingGroup,
)
from corral.scheduler.snapshot import Binding
from corral.scheduler.statement import Statement


def place_waiting(
    cache: SchedulerCache, now: datetime | None = None, *, explain: bool = True
) -> PassResult:
    """Offer the waiting groups in fair-share order (queues by their share at the start of the
    pass, then priority, then age). ``now`` decides which running work is still protected by
    its queue's minimum runtime (None: none is). Without ``explain``, a group that waits gets
    no reason worked out (a forecast's simulated passes)."""
    return _Cycle(cache, now, explain).run()


class _Cycle:
    def __init__(self, cache: SchedulerCache, now: datetime | None, explain: bool) -> None:
        self.cache = cache
        self.now = now
        self.explain = explain
        self.result = PassResult()
        #: Groups placed in this pass: never victims in it.
        self.placed_now: set[str] = set()

    def run(self) -> PassResult:
        cache = self.cache
        shapes = {key: cache.line_shape(key) for key in list(cache.lines)}
        share = {
            shape.queue: queue_share(cache.usage, shape.queue)
            for shape in shapes.values()
            if shape is not None
        }
        heads: list[tuple[tuple[Any, ...], str]] = []
        for key, shape in shapes.items():
            if shape is not None and self._may_try(shape, key):
                heapq.heappush(heads, ((share[shape.queue], *cache.lines[key][0][0]), key))
        while heads:
            _, key = heapq.heappop(heads)
            line = cache.lines[key]
            group = cache.waiting[line[0][1]]
            shape = group.shape
            self.result.tries += 1
            outcome = self._try(group)
            if isinstance(outcome, Pending):
                preemption = self._try_preempting(group)
                if preemption is None:
                    shape.failed_at, shape.reason = cache.stamp(group), self._why(group, outcome)
                    continue
                outcome = self._evict_for(group, preemption)
            heapq.heappop(line)
            cache.drop(group.key)
            self.placed_now.add(group.key)
            self.result.placed.append(Placed(group, outcome))
            if cache.line_shape(key) is not None:
                heapq.heappush(heads, ((share[shape.queue], *line[0][0]), key))
        for shape in shapes.values():
            if shape is not None and shape.reason != shape.reason_written:
                shape.reason_written = shape.reason
                self.result.reasons.append(shape)
        return self.result

    def _may_try(self, shape: Shape, key: str) -> bool:
        if shape.failed_at == NEVER:
            return False
        head = self.cache.waiting[self.cache.lines[key][0][1]]
        if shape.failed_at != self.cache.stamp(head):
            return True
        retry = shape.retry_at
        return retry is not None and self.now is not None and self.now >= retry

    def _try(self, group: WaitingGroup) -> Placement | Pending:
        shape = group.shape
        assert shape.root is not None
        result = place_pod_set(
            self.cache.snapshot(shape.levels, shape.fabric),
            shape.root,
            shape.queue,
            self.cache.usage,
            preemptible=shape.low,
            # HIGH and NORMAL may evict: explained only if they wait
            explain=shape.low and self.explain,
        )
        if isinstance(result, Pending):
            return result
        placement = _own(group, result)
        self.cache.take(group.key, placement, preemptible=shape.low, now=self.now)
        return placement

    def _why(self, group: WaitingGroup, pending: Pending) -> str:
        """The reason ``group`` waits (worked out now when the first try did not)."""
        shape = group.shape
        if pending is not UNEXPLAINED or shape.root is None or not self.explain:
            return pending.reason
        return explain_pending(self.cache.snapshot(shape.levels, shape.fabric), shape.root)

    def _try_preempting(self, group: WaitingGroup) -> Preemption | None:
        """Victims for ``group`` (HIGH or NORMAL) and where it then goes, or None. Records on
        the shape when protected work may become a victim (its minimum runtime over)."""
        shape = group.shape
        shape.retry_at = None
        if shape.low or shape.root is None or not self.cache.has_victims:
            return None
        candidates = self.cache.victims(self.now, self.placed_now)
        found = preempt(
            self.cache,
            self.cache.snapshot(shape.levels, shape.fabric),
            shape.root,
            shape.queue,
            group.priority,
            candidates,
            candidates.lost_work(),
            candidates.freshest(),
        )
        if found is None and candidates.protected_until:
            shape.retry_at = min(candidates.protected_until)
        return found

    def _evict_for(self, group: WaitingGroup, preemption: Preemption) -> Placement:
        """Evict the victims and bind ``group`` where the search put it, in one statement."""
        self.result.preemptions.append((group.key, preemption))
        placement = _own(group, preemption.placement)
        statement = Statement(self.cache)
        for victim in preemption.victims:
            statement.evict(victim.key)
        statement.allocate(group.key, placement, preemptible=group.shape.low, now=self.now)
        statement.commit()
        for victim in preemption.victims:
            self.result.evicted.append(
                Evicted(
                    victim.key,
                    group.key,
                    group.queue,
                    reclaimed=victim.queue != group.queue,
                    gpus=victim.gpus,
                )
            )
        return placement


def _own(group: WaitingGroup, found: Placement) -> Placement:
    """``found`` (placed with the pod names of the shape's first group) with the group's own pod
    names."""
    own = dict(zip(group.shape.pod_names, group.pod_names, strict=True))
    return Placement(
        tuple(Binding(own[b.pod], b.node, b.demand) for b in found.bindings),
        found.domains,
        tuple(own[name] for name in found.unplaced),
        found.queue,
    )
