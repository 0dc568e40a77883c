"""The seeded synthetic workload ``benchmarks/forecast.py`` replays: workflows of a dozen
names arriving by a Poisson process whose rate follows a daily cycle; each name has its own
size (1 to 16 pods of 1 to 8 GPUs), topology need (a required clique or none), priority, exec
timeout and true runtime distribution (log-normal, a few outliers cut off by the timeout).

Three traces (``TRACES``):

- ``current``: as above.
- ``overrun``: one name's true runtime doubles halfway through the trace (its history then
  says half of what its runs now take).
- ``new-names``: a quarter of the submissions are names never seen before, each with its own
  size and runtime (no history of their own: the pool's stands in).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from benchmarks.synthetic_cluster import CLIQUE, POD_GROUP_VERSION, TOPOLOGY, make_pod

QUEUE = "bench"
DAY = 86400.0
TRACES = ("current", "overrun", "new-names")
#: The share of submissions under names never seen before, in the ``new-names`` trace.
NEW_NAMES_SHARE = 0.25


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


def new_kind(rng: random.Random, name: str) -> Kind:
    pods = rng.choice((1, 2, 4, 8, 16))
    gpu = rng.choice((1, 2, 4, 8))
    median = rng.choice((600.0, 1800.0, 3600.0, 3 * 3600.0))
    priority = rng.choices(("NORMAL", "HIGH", "LOW"), weights=(6, 1, 2))[0]
    clique = pods > 1 and rng.random() < 0.7
    return Kind(name, pods, gpu, clique, priority, median, 4 * median)


def kinds(rng: random.Random) -> list[Kind]:
    return [new_kind(rng, f"wf-{n}") for n in range(12)]


def trace(rng: random.Random, hours: float, nodes: int, variant: str = "current") -> list[Job]:
    """Arrivals by a Poisson process with a daily cycle (thinning), sized to keep the cluster
    busy with a queue."""
    return list(arrivals(rng, hours, nodes, variant))


def arrivals(
    rng: random.Random, hours: float, nodes: int, variant: str = "current"
) -> Iterator[Job]:
    """:func:`trace`, one job at a time (a long one does not fit in memory at 5,000 nodes)."""
    menu = kinds(rng)
    overrun = menu[0]  # the name whose runs take twice as long from halfway on
    mean_gpu_seconds = statistics.mean(k.pods * k.gpu * k.median_s for k in menu)
    peak = 1.3 * nodes * 8 / mean_gpu_seconds  # arrivals per second at the peak
    count = 0
    moment = 0.0
    while True:
        moment += rng.expovariate(peak)
        if moment > hours * 3600:
            return
        if rng.random() > 0.6 + 0.4 * math.sin(2 * math.pi * moment / DAY):
            continue
        kind = rng.choice(menu)
        if variant == "new-names" and rng.random() < NEW_NAMES_SHARE:
            kind = new_kind(rng, f"new-{count}")
        runtime = rng.lognormvariate(math.log(kind.median_s), 0.5)
        if variant == "overrun" and kind is overrun and moment > hours * 1800:
            runtime *= 2
        job = Job(f"j{count:06d}", kind, moment, min(runtime, kind.timeout_s))
        job.manifests = _manifests(job)
        count += 1
        yield job


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
