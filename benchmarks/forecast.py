"""Benchmark of the start-time forecast (``scheduler/forecast.py``, docs/forecast.md) against
what the real scheduler then does, on a seeded synthetic trace replayed in virtual time.

    .venv/bin/python benchmarks/forecast.py [--nodes 5000] [--hours 24] [--quick] [--json]

The cluster is ``benchmarks/scheduler.py``'s (8-GPU nodes, 16 per gpu-clique). Workflows of a
dozen names arrive by a Poisson process whose rate follows a daily cycle; each name has its own
size (1 to 16 pods of 1 to 8 GPUs), topology need (a required clique or none), priority, exec
timeout and true runtime distribution (log-normal, a few outliers cut off by the timeout).
*Reality* is the embedded scheduler's cache and pass (``cycle.place_waiting``) driven by those
true runtimes; a preempted gang ends, as corral's default exit actions end it. Every
``--every`` minutes the forecast runs on reality's state, with runtimes sampled from what
finished so far (by workflow name, then all), and each waiting group's band is compared,
later, with its actual start.

Printed: the share of actual starts inside [p10, p90] (target >= 80%), the median of |p50 -
actual start| / actual wait (target <= 25%), the same two figures for a naive baseline in the
same run (one run with every runtime at its declared timeout, as Slurm's backfill guesses), and
the p99 time of a forecast and of one of reality's passes.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import statistics
import sys
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: python benchmarks/forecast.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.synthetic_cluster import (
    CLIQUE,
    LEVELS,
    POD_GROUP_VERSION,
    TOPOLOGY,
    make_nodes,
    make_pod,
)
from corral.domain.platform.nodes import Node
from corral.scheduler import Queue
from corral.scheduler.cache import SchedulerCache
from corral.scheduler.calibration import OUTCOMES, calibrated, calibration
from corral.scheduler.cycle import place_waiting
from corral.scheduler.forecast import (
    ClusterNow,
    Forecast,
    QueuedGroup,
    RunningGang,
    forecast,
)
from corral.scheduler.records import BoundPodOnNode
from corral.scheduler.runtimes import Runtimes, history_runtimes

T0 = datetime(2026, 11, 27, tzinfo=UTC)
QUEUE = "bench"
DAY = 86400.0
#: The submissions of this many seconds before a forecast are replayed after it as what will
#: arrive (the forecast cannot know the future; the recent past is its guess).
ARRIVALS_WINDOW = 3600.0


@dataclass(frozen=True)
class Kind:
    """A workflow name and what its runs look like."""

    name: str
    pods: int
    gpu: int
    clique: bool
    priority: str
    median_s: float
    timeout_s: float


@dataclass
class Job:
    key: str
    kind: Kind
    arrives: float  # seconds from T0
    runtime: float  # its true runtime (cut off by the timeout)
    manifests: tuple[dict[str, Any], ...] = ()
    #: Every time it started (a preempted gang starts again).
    starts: list[float] = field(default_factory=list)

    def start_after(self, moment: float) -> float | None:
        """Its first start after ``moment``: what a forecast made then predicts."""
        return next((start for start in self.starts if start > moment), None)


@dataclass
class Scores:
    inside: list[bool] = field(default_factory=list)
    errors: list[float] = field(default_factory=list)
    #: (p90 - p10) / actual wait: how wide the band is (a band of any width covers; a useful
    #: one is narrow). Open-ended bands count as infinitely wide.
    widths: list[float] = field(default_factory=list)

    def coverage(self) -> float:
        return sum(self.inside) / len(self.inside) if self.inside else 0.0

    def median_error(self) -> float:
        return statistics.median(self.errors) if self.errors else 0.0

    def median_width(self) -> float:
        return statistics.median(self.widths) if self.widths else 0.0


def kinds(rng: random.Random) -> list[Kind]:
    found = []
    for n in range(12):
        pods = rng.choice((1, 2, 4, 8, 16))
        gpu = rng.choice((1, 2, 4, 8))
        median = rng.choice((600.0, 1800.0, 3600.0, 3 * 3600.0))
        priority = rng.choices(("NORMAL", "HIGH", "LOW"), weights=(6, 1, 2))[0]
        found.append(
            Kind(
                f"wf-{n}", pods, gpu, pods > 1 and rng.random() < 0.7, priority, median, 4 * median
            )
        )
    return found


def trace(rng: random.Random, hours: float, nodes: int) -> list[Job]:
    """Arrivals by a Poisson process with a daily cycle (thinning), sized to keep the cluster
    busy with a queue."""
    menu = kinds(rng)
    mean_gpu_seconds = statistics.mean(k.pods * k.gpu * k.median_s for k in menu)
    peak = 1.3 * nodes * 8 / mean_gpu_seconds  # arrivals per second at the peak
    jobs: list[Job] = []
    moment = 0.0
    while True:
        moment += rng.expovariate(peak)
        if moment > hours * 3600:
            return jobs
        if rng.random() > 0.6 + 0.4 * math.sin(2 * math.pi * moment / DAY):
            continue
        kind = rng.choice(menu)
        runtime = min(rng.lognormvariate(math.log(kind.median_s), 0.5), kind.timeout_s)
        job = Job(f"j{len(jobs):06d}", kind, moment, runtime)
        job.manifests = _manifests(job)
        jobs.append(job)


def _manifests(job: Job) -> tuple[dict[str, Any], ...]:
    spec: dict[str, Any] = {"queue": QUEUE, "minMember": job.kind.pods}
    if job.kind.clique:
        spec["topologyConstraint"] = {"topology": TOPOLOGY, "requiredTopologyLevel": CLIQUE}
    group = {"apiVersion": POD_GROUP_VERSION, "kind": "PodGroup", "spec": spec}
    pods = [
        {"apiVersion": "v1", **make_pod(f"{job.key}-{i}", job.kind.gpu, None)}
        for i in range(job.kind.pods)
    ]
    return (group, *pods)


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


def replay(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    nodes = make_nodes(args.nodes)
    jobs = trace(rng, args.hours, args.nodes)
    reality = Reality(nodes)
    checks = [m * 60.0 for m in range(args.every, int(args.hours * 60), args.every)]
    pending: list[tuple[float, str, Any, Any]] = []  # (when, key, forecast, baseline)
    outcomes = Outcomes()
    forecast_ms: list[float] = []
    arrivals = iter(jobs)
    upcoming = next(arrivals, None)
    moment = 0.0
    horizon = args.hours * 3600
    while moment <= horizon:
        while upcoming is not None and upcoming.arrives <= moment:
            reality.arrive(upcoming)
            upcoming = next(arrivals, None)
        reality.step(moment)
        while checks and checks[0] <= moment:
            checks.pop(0)
            if reality.waiting:
                started = time.perf_counter()
                found = forecast(reality.now_state(moment, False), seed=args.seed, runs=args.runs)
                forecast_ms.append((time.perf_counter() - started) * 1000)
                outcomes.resolve(reality, moment)
                outcomes.add(moment, found)
                at = T0 + timedelta(seconds=moment)
                found = calibrated(found, at, calibration(outcomes.done))
                naive = forecast(reality.now_state(moment, True), seed=args.seed, runs=1)
                pending.extend((moment, key, found[key], naive[key]) for key in found)
        candidates = [
            t
            for t in (
                reality.next_end(),
                upcoming.arrives if upcoming else None,
                checks[0] if checks else None,
            )
            if t is not None
        ]
        if not candidates:
            break
        moment = max(min(candidates), moment)
        reality.end_until(moment)
    return _scores(reality, pending, forecast_ms, len(jobs))


class Outcomes:
    """Past forecasts whose group has started since: what calibrates the next forecast, as
    the controller's forecaster keeps them (``scheduler/calibration.py``)."""

    def __init__(self) -> None:
        self.open: list[tuple[float, str, float]] = []  # (when, key, median wait)
        self.done: deque[tuple[float, float]] = deque(maxlen=OUTCOMES)

    def add(self, when: float, found: dict[str, Forecast]) -> None:
        for key, one in found.items():
            if one.p50 is not None:
                median = (one.p50 - T0).total_seconds() - when
                self.open.append((when, key, median))

    def resolve(self, reality: Reality, moment: float) -> None:
        still = []
        for when, key, median in self.open:
            actual = reality.jobs[key].start_after(when)
            if actual is not None and actual <= moment:
                self.done.append((median, actual - when))
            else:
                still.append((when, key, median))
        self.open = still


def _scores(
    reality: Reality,
    pending: list[tuple[float, str, Any, Any]],
    forecast_ms: list[float],
    jobs: int,
) -> dict[str, Any]:
    ours, baseline = Scores(), Scores()
    for when, key, found, naive in pending:
        actual = reality.jobs[key].start_after(when)
        if actual is None:
            continue  # not started again in the trace
        start = T0 + timedelta(seconds=actual)
        wait = actual - when
        for scores, band in ((ours, found), (baseline, naive)):
            low = band.p10 or datetime.max.replace(tzinfo=UTC)
            high = band.p90 or datetime.max.replace(tzinfo=UTC)
            scores.inside.append(low <= start <= high)
            mid = band.p50
            error = abs((mid - start).total_seconds()) if mid else wait * 10
            scores.errors.append(error / wait)
            width = (band.p90 - band.p10).total_seconds() if band.p90 and band.p10 else math.inf
            scores.widths.append(width / wait)
    return {
        "jobs": jobs,
        "forecasts": len(ours.inside),
        "coverage": round(ours.coverage(), 3),
        "median_error": round(ours.median_error(), 3),
        "median_band_width": round(ours.median_width(), 3),
        "baseline_coverage": round(baseline.coverage(), 3),
        "baseline_median_error": round(baseline.median_error(), 3),
        "forecast_p99_ms": round(_p99(forecast_ms), 1),
        "pass_p99_ms": round(_p99(reality.pass_ms), 2),
    }


def _p99(values: list[float]) -> float:
    ordered = sorted(values) or [0.0]
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--every", type=int, default=30, help="minutes between forecasts")
    parser.add_argument("--runs", type=int, default=20, help="Monte Carlo runs per forecast")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="64 nodes, 6 hours, 6 runs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.hours, args.runs = 64, 6.0, 6  # 6 h: up to the daily peak
    result = replay(args)
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"{args.nodes} nodes x 8 GPUs, {args.hours:g} h trace, {result['jobs']} workflows, "
        f"forecasts every {args.every} min ({args.runs} runs each): {result['forecasts']} "
        "forecast starts compared"
    )
    print(
        f"  forecast  inside [p10, p90] {result['coverage']:.0%} (target >= 80%)  "
        f"median |p50 - actual| / wait {result['median_error']:.0%} (target <= 25%)  "
        f"median (p90 - p10) / wait {result['median_band_width']:.0%}"
    )
    print(
        f"  baseline  inside [p10, p90] {result['baseline_coverage']:.0%}  median |p50 - actual|"
        f" / wait {result['baseline_median_error']:.0%}  (every runtime its timeout, one run)"
    )
    print(
        f"  time      forecast p99 {result['forecast_p99_ms']} ms, one scheduling pass p99 "
        f"{result['pass_p99_ms']} ms"
    )


if __name__ == "__main__":
    main()
