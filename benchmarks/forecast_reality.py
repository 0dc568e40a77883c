"""*Reality* for ``benchmarks/forecast.py``: the embedded scheduler's cache and pass
(``cycle.place_waiting``) driven by a trace's true runtimes (``benchmarks/forecast_trace.py``);
a preempted gang ends, as corral's default exit actions end it. ``now_state`` is what a
forecast made at a moment starts from, with runtimes sampled from what finished so far (by
workflow name, then all)."""

from __future__ import annotations

import heapq
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta

from benchmarks.forecast_trace import QUEUE, Job, Kind
from benchmarks.synthetic_cluster import LEVELS
from corral.domain.platform.nodes import Node
from corral.scheduler import Queue
from corral.scheduler.cache import SchedulerCache
from corral.scheduler.cycle import place_waiting
from corral.scheduler.forecast import ClusterNow, QueuedGroup, RunningGang
from corral.scheduler.records import BoundPodOnNode
from corral.scheduler.runtimes import Runtimes, history_runtimes

T0 = datetime(2026, 11, 27, tzinfo=UTC)
#: The submissions of this many seconds before a forecast are replayed after it as what will
#: arrive (the forecast cannot know the future; the recent past is its guess).
ARRIVALS_WINDOW = 3600.0


class Reality:
    """The embedded scheduler driven by the true runtimes."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.cache = SchedulerCache(nodes, [Queue(QUEUE)], [])
        self.jobs: dict[str, Job] = {}
        self.waiting: dict[str, Job] = {}
        self.running: dict[str, tuple[Job, tuple[BoundPodOnNode, ...]]] = {}
        self.ends: list[tuple[float, str]] = []
        self.finished: dict[str, list[float]] = defaultdict(list)
        self.pass_ms: list[float] = []

    def arrive(self, job: Job) -> None:
        self.jobs[job.key] = job
        self.waiting[job.key] = job
        self.cache.add(
            job.key,
            list(job.manifests),
            levels=LEVELS,
            priority=job.kind.priority,
            age=(T0 + timedelta(seconds=job.arrives), job.key),
        )

    def step(self, moment: float) -> None:
        started = time.perf_counter()
        passed = place_waiting(self.cache, T0 + timedelta(seconds=moment), explain=False)
        self.pass_ms.append((time.perf_counter() - started) * 1000)
        for eviction in passed.evicted:  # a preempted gang ends (FAILED_PREEMPTED), as
            self.running.pop(eviction.group)  # corral's default exit actions end it
        for placed in passed.placed:
            job = self.waiting.pop(placed.group.key)
            job.starts.append(moment)
            specs = {m["metadata"]["name"]: m["spec"] for m in job.manifests[1:]}
            pods = tuple(
                BoundPodOnNode(b.pod, b.node, job.key, {}, specs[b.pod], b.demand)
                for b in placed.placement.bindings
            )
            self.running[job.key] = (job, pods)
            heapq.heappush(self.ends, (moment + job.runtime, job.key))

    def next_end(self) -> float | None:
        while self.ends and self.ends[0][1] not in self.running:
            heapq.heappop(self.ends)  # evicted meanwhile
        return self.ends[0][0] if self.ends else None

    def end_until(self, moment: float) -> None:
        while self.ends and self.ends[0][0] <= moment:
            _, key = heapq.heappop(self.ends)
            if key in self.running:
                job, _ = self.running.pop(key)
                self.cache.release(key)
                self.finished[job.kind.name].append(job.runtime)

    def timeouts(self) -> list[datetime]:
        """When each running gang reaches its exec timeout."""
        return [
            T0 + timedelta(seconds=job.starts[-1] + job.kind.timeout_s)
            for job, _ in self.running.values()
        ]

    def now_state(self, moment: float, naive: bool) -> ClusterNow:
        every = [r for runs in self.finished.values() for r in runs]

        def runtimes(kind: Kind) -> Runtimes:
            if naive:
                return Runtimes((), kind.timeout_s)
            return history_runtimes(self.finished[kind.name], every, kind.timeout_s)

        running = [
            RunningGang(key, pods, T0 + timedelta(seconds=job.starts[-1]), runtimes(job.kind))
            for key, (job, pods) in self.running.items()
        ]
        waiting = [self._queued(job, runtimes(job.kind)) for job in self.waiting.values()]
        # The last hour's submissions, replayed over the next two hours: what will arrive.
        recent = [
            job for job in self.jobs.values() if moment - ARRIVALS_WINDOW < job.arrives <= moment
        ]
        arrivals = [
            (
                job.arrives - (moment - ARRIVALS_WINDOW) + ARRIVALS_WINDOW * repeat,
                self._queued(job, runtimes(job.kind)),
            )
            for repeat in range(2)
            for job in recent
        ]
        return ClusterNow(
            self.nodes,
            [Queue(QUEUE)],
            running,
            waiting,
            T0 + timedelta(seconds=moment),
            arrivals=() if naive else arrivals,
        )

    @staticmethod
    def _queued(job: Job, runtimes: Runtimes) -> QueuedGroup:
        age = (T0 + timedelta(seconds=job.arrives), job.key)
        return QueuedGroup(job.key, job.manifests, LEVELS, job.kind.priority, age, runtimes)
