"""What one forecast costs, as scheduling passes of the same queue (``benchmarks/forecast.py``):
the cluster is filled from the trace, then ``waiting`` more groups queue. The unit is one pass
of the embedded scheduler over that queue as capacity comes back (half the running gangs
ended: what fits is placed, every other shape tried; a pass on a full cluster fails every shape
at its first fit test and costs a fraction of a millisecond). One forecast of the queue (all
its runs and the expected arrivals) is measured against it. CPU time of this process, so that
other load on the machine does not count."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.forecast_reality import Reality
from benchmarks.forecast_trace import arrivals
from benchmarks.synthetic_cluster import make_nodes
from corral.scheduler.cache import SchedulerCache
from corral.scheduler.cycle import place_waiting
from corral.scheduler.forecast import ClusterNow, forecast

#: Past runs of each name the cluster has seen finish before the measurement.
HISTORY = 20
#: Passes timed; the median is the unit.
PASSES = 3


@dataclass(frozen=True)
class Cost:
    waiting: int
    pass_s: float
    forecast_s: float

    @property
    def passes(self) -> float:
        return self.forecast_s / self.pass_s


def cost(nodes: int, waiting: int, runs: int, seed: int) -> Cost:
    rng = random.Random(seed)
    reality = Reality(make_nodes(nodes))
    jobs = arrivals(rng, 24 * 30, nodes)  # far more than fill the cluster and the queue
    moment = 0.0
    while len(reality.waiting) < waiting:
        job = next(jobs)
        moment = job.arrives
        reality.arrive(job)
        if len(reality.jobs) % 50 == 0:
            reality.step(moment)  # what fits starts: the rest queues
    for _ in range(5):  # until a pass changes nothing: the timed ones then do the same work
        before = (len(reality.waiting), len(reality.running))
        reality.step(moment)
        if (len(reality.waiting), len(reality.running)) == before:
            break
    for job in reality.jobs.values():  # the names' past runs, as if they had finished
        runs_of = reality.finished[job.kind.name]
        if len(runs_of) < HISTORY:
            runs_of.append(job.runtime)
    state = reality.now_state(moment, False)
    pass_s = statistics.median(_timed_pass(state) for _ in range(PASSES))
    started = time.process_time()
    forecast(state, seed=seed, runs=runs)
    return Cost(len(reality.waiting), pass_s, time.process_time() - started)


def _timed_pass(state: ClusterNow) -> float:
    """One pass of the embedded scheduler over the whole queue as capacity comes back: on
    the cluster with half its running gangs ended, every waiting group offered (what fits is
    placed, every other shape tried). The queue is read before the clock starts."""
    kept = state.running[: len(state.running) // 2]
    cache = SchedulerCache(
        state.nodes,
        state.queues,
        [pod for gang in kept for pod in gang.pods],
        bound_at={gang.key: gang.started_at for gang in kept},
    )
    for group in state.waiting:
        cache.add(
            group.key, group.manifests, levels=group.levels, priority=group.priority, age=group.age
        )
    started = time.process_time()
    place_waiting(cache, state.now, explain=False)
    return time.process_time() - started


def costs(nodes: int, sizes: Sequence[int], runs: int, seed: int) -> list[Cost]:
    return [cost(nodes, size, runs, seed) for size in sizes]
