"""Fragmentation: how whole the cluster stays under churn, for three packing orders
(scheduler/packing.py, docs/scheduler.md#packing) on the same streams: the order before issue 25
(``tightest``, the baseline: each domain by its own free GPUs, ties by id, pods one by one into
the tightest child), KAI's (``top-down``: the fullest domains from the root down) and corral's
(``best-fit``: own free GPUs, ties from the top down); both of the last put each set in as few
child domains as hold it. Run through ``benchmarks/scheduler.py``:

    .venv/bin/python -m benchmarks.scheduler --fragmentation [1024] [--seeds 20] [--steps 3000]

The cluster is ``scheduler.py``'s (zone > spine > rack > gpu-clique, 16 nodes of 8 GPUs per
clique, 2 cliques per rack, 4 racks per spine). Each seeded stream has ``--steps`` jobs; each
step one job arrives and the jobs whose time is up leave. Jobs are single pods of 1 to 8 GPUs
(no topology), gangs of 2 to 8 pods that require a spine (and say nothing finer), gangs of 4 to
16 8-GPU pods that require a rack, and large gangs: a whole clique (16 x 8 GPUs, required clique)
or a whole rack (32 x 8, required rack). A job that does not fit is dropped. Reported per order,
as means over the streams: at the first large gang refused, its step, GPU utilisation and the
whole free cliques, racks and spines; over the run, the whole free domains (mean over the
steps), the large gangs refused, the racks each gang of two or more pods spans, and the gangs
split across racks though one rack of their domain could have held them all. The last line says
whether corral's order is no worse than the baseline on whole free domains and racks per gang,
and better on one.
"""

from __future__ import annotations

import heapq
import random
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.synthetic_cluster import (
    CLIQUE,
    GPUS_PER_NODE,
    LEVELS,
    RACK,
    SPINE,
    TOPOLOGY,
    make_nodes,
    make_pod,
)
from corral.scheduler import ClusterSnapshot, Placement, place_group
from corral.scheduler.packing_policy import Packing
from corral.scheduler.snapshot import Binding, Domain

LARGE = "large"
WHOLE_LEVELS = (CLIQUE, RACK, SPINE)
LARGE_GANGS = ((CLIQUE, 16), (RACK, 32))


@dataclass(frozen=True)
class Job:
    kind: str
    pod_group: dict[str, Any]
    pods: list[dict[str, Any]]
    lifetime: int


def _gang(name: str, count: int, gpu: int, required: str) -> tuple[dict[str, Any], list[Any]]:
    pods = [make_pod(f"{name}-p{k}", gpu, None) for k in range(count)]
    spec = {
        "queue": "bench",
        "minMember": count,
        "topologyConstraint": {"topology": TOPOLOGY, "requiredTopologyLevel": required},
    }
    return {"kind": "PodGroup", "spec": spec}, pods


def job_stream(seed: int, nodes: int) -> Iterator[Job]:
    """The mixed stream of the module docstring; lifetimes scale with the cluster so that the
    offered load passes its capacity at every size."""
    rng = random.Random(seed)
    for n in range(10**9):
        lifetime = int(rng.uniform(0.02, 0.3) * nodes)
        draw = rng.random()
        if draw < 0.5:
            pod = make_pod(f"j{n}", rng.choice((1, 2, 4, 8)), None)
            group = {"kind": "PodGroup", "spec": {"queue": "bench", "minMember": 1}}
            yield Job("pod", group, [pod], lifetime)
        elif draw < 0.75:
            group, pods = _gang(f"j{n}", rng.randint(2, 8), rng.choice((1, 2, 4, 8)), SPINE)
            yield Job("spine", group, pods, lifetime)
        elif draw < 0.9:
            group, pods = _gang(f"j{n}", rng.randint(4, 16), GPUS_PER_NODE, RACK)
            yield Job("rack", group, pods, lifetime)
        else:
            required, count = rng.choice(LARGE_GANGS)
            group, pods = _gang(f"j{n}", count, GPUS_PER_NODE, required)
            yield Job(LARGE, group, pods, lifetime)


@dataclass
class Outcome:
    steps: int
    first_refusal: int | None = None  # the step of the first large gang refused
    utilisation: float = 0.0  # GPU utilisation then
    whole: dict[str, int] = field(default_factory=dict)  # level label -> whole free domains then
    #: level label -> whole free domains summed over the steps (for the mean over the run)
    whole_steps: dict[str, int] = field(default_factory=dict)
    large: int = 0
    large_refused: int = 0
    racks_per_gang: list[int] = field(default_factory=list)
    needless_splits: int = 0


def run(nodes: Sequence[Any], jobs: Iterator[Job], packing: Packing, steps: int) -> Outcome:
    """Feed ``steps`` jobs of ``jobs`` to one snapshot packed by ``packing``."""
    snapshot = ClusterSnapshot.from_nodes(nodes, LEVELS, packing)
    total = snapshot.root.free_gpu
    rack_level = LEVELS.index(RACK)
    leaving: list[tuple[int, int, tuple[Binding, ...]]] = []
    outcome = Outcome(steps, whole_steps=dict.fromkeys(WHOLE_LEVELS, 0))
    for step, job in zip(range(steps), jobs, strict=False):
        while leaving and leaving[0][0] <= step:
            snapshot.release(heapq.heappop(leaving)[2])
        for label, count in _whole_domains(snapshot).items():
            outcome.whole_steps[label] += count
        outcome.large += job.kind == LARGE
        placed = place_group(snapshot, job.pod_group, job.pods)
        if not isinstance(placed, Placement):
            if job.kind == LARGE:
                outcome.large_refused += 1
                if outcome.first_refusal is None:
                    outcome.first_refusal = step
                    outcome.utilisation = 1 - snapshot.root.free_gpu / total
                    outcome.whole = _whole_domains(snapshot)
            continue
        if len(job.pods) > 1:
            racks = {snapshot.domain_of(b.node, rack_level) for b in placed.bindings}
            outcome.racks_per_gang.append(len(racks))
            if len(racks) > 1 and _one_rack_could_hold(snapshot, placed, job):
                outcome.needless_splits += 1
        snapshot.bind(placed.bindings)
        heapq.heappush(leaving, (step + job.lifetime, step, placed.bindings))
    return outcome


def _one_rack_could_hold(snapshot: ClusterSnapshot, placed: Placement, job: Job) -> bool:
    """Whether a rack of the domain the gang was placed in could have held all its pods (the
    snapshot before binding; every gang of this stream asks the same GPUs of each pod)."""
    gpu = int(job.pods[0]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])
    required = job.pod_group["spec"]["topologyConstraint"]["requiredTopologyLevel"]
    within = snapshot.by_level[LEVELS.index(required)][placed.domains[""]]
    racks = snapshot.domains_at(LEVELS.index(RACK), within)
    return any(rack.copies_fitting(gpu) >= len(job.pods) for rack in racks)


def _whole_domains(snapshot: ClusterSnapshot) -> dict[str, int]:
    return {
        label: sum(_is_whole(domain) for domain in snapshot.by_level[LEVELS.index(label)].values())
        for label in WHOLE_LEVELS
    }


def _is_whole(domain: Domain) -> bool:
    return domain.gpu_histogram[GPUS_PER_NODE] == sum(domain.gpu_histogram)


#: The orders compared, the one before issue 25 first (the baseline), corral's last.
ORDERS = (
    ("baseline", Packing.TIGHTEST),
    ("KAI", Packing.TOP_DOWN),
    ("corral", Packing.BEST_FIT),
)


def compare(sizes: Sequence[int], seeds: int, steps: int) -> dict[Packing, list[Outcome]]:
    """Every order of :data:`ORDERS` on the same streams; prints one line per order and size."""
    results: dict[Packing, list[Outcome]] = {packing: [] for _, packing in ORDERS}
    for size in sizes:
        nodes = make_nodes(size)
        print(f"{size} nodes x {GPUS_PER_NODE} GPUs, {seeds} seeded streams of {steps} jobs")
        for name, packing in ORDERS:
            outcomes = [run(nodes, job_stream(s, size), packing, steps) for s in range(seeds)]
            results[packing] += outcomes
            print(f"  {name:<8} ({packing.value:>8}) {summary(outcomes)}")
    return results


@dataclass(frozen=True)
class Figures:
    """The means over several runs that the verdict compares."""

    at_refusal: dict[str, float]  # whole free domains at the first large gang refused
    over_run: dict[str, float]  # whole free domains, mean over the steps
    racks_per_gang: float
    refused_runs: int  # the runs that refused a large gang at all

    @classmethod
    def of(cls, outcomes: Sequence[Outcome]) -> Figures:
        refused = [o for o in outcomes if o.first_refusal is not None]
        return cls(
            at_refusal={
                label: statistics.fmean(o.whole[label] for o in refused) if refused else 0.0
                for label in WHOLE_LEVELS
            },
            over_run={
                label: statistics.fmean(o.whole_steps[label] / o.steps for o in outcomes)
                for label in WHOLE_LEVELS
            },
            racks_per_gang=statistics.fmean(s for o in outcomes for s in o.racks_per_gang),
            refused_runs=len(refused),
        )


def _levels(whole: dict[str, float]) -> str:
    return " ".join(f"{label.split('/')[-1]} {whole[label]:5.2f}" for label in WHOLE_LEVELS)


def summary(outcomes: Sequence[Outcome]) -> str:
    figures = Figures.of(outcomes)
    refused = [o for o in outcomes if o.first_refusal is not None]
    first = "-"
    if refused:
        step = statistics.fmean(o.first_refusal or 0 for o in refused)
        util = statistics.fmean(o.utilisation for o in refused)
        first = f"step {step:6.1f} util {util:5.1%} whole {_levels(figures.at_refusal)}"
    widest = max(span for o in outcomes for span in o.racks_per_gang)
    return (
        f"first large gang refused ({figures.refused_runs} runs): {first} | over the run: "
        f"whole {_levels(figures.over_run)}, large refused "
        f"{sum(o.large_refused for o in outcomes)}/{sum(o.large for o in outcomes)}, racks per "
        f"gang {figures.racks_per_gang:4.2f} (max {widest}), "
        f"split though one rack held it {sum(o.needless_splits for o in outcomes)}"
    )


def verdict(results: dict[Packing, list[Outcome]]) -> str:
    """Whether corral's order is no worse than the baseline's on whole free domains (at the
    first refusal and over the run) and racks per gang, and better on one of them."""
    old, new = Figures.of(results[Packing.TIGHTEST]), Figures.of(results[Packing.BEST_FIT])
    counts = (
        ("whole at first refusal", sum(new.at_refusal.values()), sum(old.at_refusal.values())),
        ("whole over the run", sum(new.over_run.values()), sum(old.over_run.values())),
        ("racks per gang", -new.racks_per_gang, -old.racks_per_gang),
    )
    no_worse = all(mine >= theirs for _, mine, theirs in counts)
    better = any(mine > theirs for _, mine, theirs in counts)
    parts = ", ".join(
        f"{name} {abs(mine):.2f} against {abs(theirs):.2f}" for name, mine, theirs in counts
    )
    word = "better" if no_worse and better else "NOT better"
    return f"  corral against the baseline: {parts}: {word}"
