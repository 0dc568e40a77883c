"""The fault-storm stream of ``benchmarks/scheduler.py --fault-storm`` (docs/health.md): the
embedded scheduler's state under churn while trays fail and heal, against the same stream with
no faults, in one run.

One tick is one second of cluster time. Each tick, ``gang8`` gangs (8 pods sharing a required
gpu-clique, the pool's NVLink level) arrive at a rate that keeps about 80% of the GPUs busy,
gangs whose time is up finish and give their capacity back, and one pass places what waits.
In the storm, 1% of the trays fail per minute (spread over the ticks), half of them NotReady
and half losing their NVLink fabric, and each heals a minute later. Each tick then does what
the lifecycle controller does: the cache takes the new health, the groups a fault stops
(``services/lifecycle/node_faults.stops_due``) are released and wait again, whole, and the pass
keeps gangs out of cliques with a faulty tray.

Reported per stream: tick p50/p99 (ms, health changes, stops, arrivals, releases and the pass)
and pods placed per second of tick time; then the storm's ratios against the no-fault stream:
tick p99 (target <= 1.5x) and pods/s (target >= 0.8x).
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from corral.domain.platform.node_health import Fabric, NodeHealth
from corral.domain.platform.nodes import Node
from corral.domain.topology.fabric import FabricRule
from corral.scheduler import Queue
from corral.scheduler.cache import SchedulerCache
from corral.scheduler.cycle import place_waiting
from corral.services.lifecycle.node_faults import stops_due

T0 = datetime(2026, 11, 27, tzinfo=UTC)
#: Fraction of the trays that fail (and heal) per minute.
FAIL_PER_MINUTE = 0.01
#: How long a failed tray stays failed.
DOWN_SECONDS = 60
#: Gangs run between these many seconds.
LIFETIME = (120, 600)
#: Busy fraction of the GPUs the arrivals aim at.
TARGET_BUSY = 0.8


@dataclass
class StormResult:
    ticks_ms: list[float] = field(default_factory=list)
    pods: int = 0
    failed_trays: int = 0
    stopped_gangs: int = 0
    waiting_at_end: int = 0

    @property
    def seconds(self) -> float:
        return sum(self.ticks_ms) / 1000

    @property
    def rate(self) -> float:
        return self.pods / self.seconds if self.seconds else 0.0

    def p(self, quantile: float) -> float:
        ordered = sorted(self.ticks_ms)
        return ordered[min(len(ordered) - 1, int(len(ordered) * quantile))]

    def line(self, name: str) -> str:
        p50 = statistics.median(self.ticks_ms)
        return (
            f"  {name:<11} {len(self.ticks_ms):>5} ticks  p50 {p50:7.2f} "
            f"ms  p99 {self.p(0.99):7.2f} ms  {self.pods:>7} pods placed  {self.rate:>8.0f} pods/s"
            f"  {self.failed_trays} trays failed, {self.stopped_gangs} gangs stopped and "
            f"requeued, {self.waiting_at_end} waiting at the end"
        )


def run_stream(
    nodes: list[Node],
    gangs: list[tuple[list[dict[str, object]], int]],
    ticks: int,
    seed: int,
    *,
    faults: bool,
    levels: tuple[str, ...],
    clique: str,
) -> StormResult:
    """``gangs``: each gang's manifests and GPUs, in arrival order."""
    rng = random.Random(seed)
    cache = SchedulerCache(nodes, [Queue("bench")], [])
    fabric = FabricRule(clique, False)
    result = StormResult()
    total_gpus = sum(int(n.allocatable["nvidia.com/gpu"]) for n in nodes)
    mean_gpus = statistics.mean(g for _, g in gangs[:200])
    arrivals_per_tick = TARGET_BUSY * total_gpus / (mean_gpus * statistics.mean(LIFETIME))
    ends: dict[int, list[str]] = {}  # tick -> gangs that finish then
    running: dict[str, int] = {}  # gang -> its end tick
    heals: dict[int, list[str]] = {}
    failures_per_tick = FAIL_PER_MINUTE * len(nodes) / 60
    owed = arrived = 0.0
    next_gang = 0
    manifests_of: dict[str, list[dict[str, object]]] = {}
    for tick in range(ticks):
        now = T0 + timedelta(seconds=tick)
        arrived += arrivals_per_tick
        owed += failures_per_tick if faults else 0.0
        failing = []
        while owed >= 1:
            owed -= 1
            failing.append(rng.randrange(len(nodes)))
        started = time.perf_counter()
        for index in failing:
            name = nodes[index].name
            fabric_lost = rng.random() < 0.5
            health = (
                NodeHealth(fabric=Fabric.FAILED, fabric_reason="storm")
                if fabric_lost
                else NodeHealth(ready=False, ready_since=now, not_ready_reason="storm")
            )
            cache.set_health(name, health)
            heals.setdefault(tick + DOWN_SECONDS, []).append(name)
            result.failed_trays += 1
        for name in heals.pop(tick, []):
            cache.set_health(name, NodeHealth())
        for stop in stops_due(cache, now):
            if stop.group in running:
                cache.release(stop.group)
                del running[stop.group]
                cache.add(
                    stop.group,
                    manifests_of[stop.group],
                    levels=levels,
                    priority="NORMAL",
                    age=(stop.group,),
                    fabric=fabric,
                )
                result.stopped_gangs += 1
        for key in ends.pop(tick, []):
            if running.get(key) == tick:
                cache.release(key)
                del running[key]
        while next_gang < arrived and next_gang < len(gangs):
            key = f"g{next_gang:07d}"
            manifests_of[key] = gangs[next_gang][0]
            cache.add(
                key,
                gangs[next_gang][0],
                levels=levels,
                priority="NORMAL",
                age=(key,),
                fabric=fabric,
            )
            next_gang += 1
        passed = place_waiting(cache, now)
        for placed in passed.placed:
            end = tick + rng.randint(*LIFETIME)
            running[placed.group.key] = end
            ends.setdefault(end, []).append(placed.group.key)
            result.pods += len(placed.placement.bindings)
        result.ticks_ms.append((time.perf_counter() - started) * 1000)
    result.waiting_at_end = len(cache.waiting)
    return result
