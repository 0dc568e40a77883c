"""Benchmark of corral's topology-aware gang scheduler against a node-scanning baseline.

    .venv/bin/python -m benchmarks.scheduler [--sizes 1000,5000,10000] [--baseline-seconds 20]

Clusters of 8-GPU nodes in 4 topology levels (zone > spine > rack > gpu-clique, 16 nodes per
clique); two streams of PodGroups built as corral's submission pipeline builds them:

* ``gang8``: 8-pod gangs with a required gpu-clique (1, 2, 4 or 8 GPUs per pod) — the
  issue's target (>= 5,000 pods/s at 5,000 nodes);
* ``mixed``: gangs of 4 to 64 pods in two subgroups, each subgroup a required gpu-clique and
  the whole gang a preferred spine, interleaved with single plain pods (no topology).

Each stream is fed until the first PodGroup that cannot be placed. Reported: pods placed per
second (time in ``place_group`` + ``bind``), p50/p99 ms per PodGroup, the fraction of required
constraints honoured (checked on node labels after the run), GPU utilisation at the first
rejection. The baseline sees the same stream: per pod it scans every node (nodeSelector,
taints, free resources), binpacks, and honours the required clique by fixing the clique of
the subgroup's first pod and retrying the next clique on failure. It is stopped after
``--baseline-seconds``; its figures then cover the PodGroups it got through, and the scheduler's
figures on that same prefix are shown next to it.

``--preemption [SIZES]`` (5,000 nodes by default) runs two streams through the embedded
scheduler's state instead (``scheduler/cache.py`` and ``cycle.py``: queues, fair share,
shapes, preemption),
one gang per pass: ``fill``, LOW ``gang8`` gangs until the cluster is full (no preemption: the
baseline of the same run), then ``preempt``, HIGH ``gang8`` gangs that each must evict LOW gangs
from one clique, until one cannot be placed. Before ``preempt`` every LOW gang reports a
checkpoint at a random moment since its start, so that victims are chosen by the work they
would lose (docs/checkpoints.md). Reported: pods placed per second (time in ``add``
+ ``place_waiting``, evictions included), p50/p99 per gang, the GPUs evicted, and checks that
every HIGH gang kept its required clique and evicted only LOW gangs.

    .venv/bin/python -m benchmarks.scheduler --preemption [5000]

``--fault-storm [SIZES]`` (5,000 nodes by default) streams ``gang8`` gangs through the embedded
scheduler's state for ``--minutes`` of cluster time while 1% of the trays fail and heal per
minute, against the same stream without faults (``benchmarks/fault_storm.py``).

    .venv/bin/python -m benchmarks.scheduler --fault-storm [5000] [--minutes 30]

``--fragmentation [SIZES]`` (1,024 nodes by default) compares the packing orders under churn
instead: how many whole cliques, racks and spines stay free, and how many racks each gang spans
(``benchmarks/fragmentation.py``).

    .venv/bin/python -m benchmarks.scheduler --fragmentation [1024] [--seeds 20] [--steps 3000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: python benchmarks/scheduler.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.synthetic_cluster import (
    CLIQUE,
    GPUS_PER_NODE,
    LEVELS,
    NODES_PER_CLIQUE,
    POD_GROUP_VERSION,
    SPINE,
    TOPOLOGY,
    make_nodes,
    make_pod,
)
from corral.domain.platform.nodes import Node, belongs_to
from corral.scheduler import ClusterSnapshot, Placement, Queue, place_group
from corral.scheduler.cache import SchedulerCache
from corral.scheduler.cycle import place_waiting


@dataclass
class Group:
    pod_group: dict[str, Any]
    pods: list[dict[str, Any]]
    #: subgroup name ("" = whole group) -> pod names that must share one clique
    required: dict[str, list[str]]


def gang8_stream(seed: int) -> Iterator[Group]:
    rng = random.Random(seed)
    for n in range(10**9):
        gpu = rng.choice((1, 2, 4, 8))
        pods = [make_pod(f"g{n}-p{k}", gpu, None) for k in range(8)]
        spec = {
            "queue": "bench",
            "minMember": 8,
            "topologyConstraint": {"topology": TOPOLOGY, "requiredTopologyLevel": CLIQUE},
        }
        names = [p["metadata"]["name"] for p in pods]
        yield Group({"kind": "PodGroup", "spec": spec}, pods, {"": names})


def mixed_stream(seed: int) -> Iterator[Group]:
    rng = random.Random(seed)
    for n in range(10**9):
        if rng.random() < 0.3:
            pod = make_pod(f"g{n}-plain", rng.choice((0, 1, 2)), None)
            yield Group({"kind": "PodGroup", "spec": {"queue": "bench", "minMember": 1}}, [pod], {})
            continue
        size = rng.choice((4, 8, 16, 32, 64))
        half = size // 2
        gpu = rng.choice([g for g in (1, 2, 4, 8) if half * g <= NODES_PER_CLIQUE * GPUS_PER_NODE])
        required: dict[str, list[str]] = {}
        pods = []
        subgroups = []
        for s in ("a", "b"):
            members = [make_pod(f"g{n}-{s}{k}", gpu, s) for k in range(half)]
            pods += members
            required[s] = [p["metadata"]["name"] for p in members]
            constraint = {"topology": TOPOLOGY, "requiredTopologyLevel": CLIQUE}
            subgroups.append({"name": s, "minMember": half, "topologyConstraint": constraint})
        spec = {
            "queue": "bench",
            "topologyConstraint": {"topology": TOPOLOGY, "preferredTopologyLevel": SPINE},
            "subGroups": subgroups,
        }
        yield Group({"kind": "PodGroup", "spec": spec}, pods, required)


# -- the baseline --------------------------------------------------------------------------------


class Baseline:
    """Scans every node for every pod, as a filter-then-score scheduler without indexes."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        snapshot = ClusterSnapshot.from_nodes(nodes, ())
        self.free = [snapshot.free(i) for i in range(len(nodes))]
        self._snapshot = snapshot  # only for its quantity parsing, never for placement

    def place(self, group: Group) -> dict[str, str] | None:
        taken: list[tuple[int, Any]] = []
        placed: dict[str, str] = {}
        by_subgroup: dict[str | None, list[dict[str, Any]]] = {}
        for pod in group.pods:
            label = pod["metadata"]["labels"].get("kai.scheduler/subgroup-name")
            by_subgroup.setdefault(label, []).append(pod)
        for subgroup, pods in by_subgroup.items():
            required = bool(group.required) and (subgroup or "") in group.required
            if not self._place_subgroup(pods, required, taken, placed):
                for i, demand in reversed(taken):
                    self._give(i, demand)
                return None
        return placed

    def _place_subgroup(
        self,
        pods: list[dict[str, Any]],
        required: bool,
        taken: list[tuple[int, Any]],
        placed: dict[str, str],
    ) -> bool:
        excluded: set[str] = set()
        while True:
            mark = len(taken)
            clique: str | None = None
            ok = True
            for pod in pods:
                node = self._scan(pod, clique, excluded)
                if node is None:
                    ok = False
                    break
                if required and clique is None:
                    clique = self.nodes[node].labels[CLIQUE]
                demand = _demand(pod)
                self._take(node, demand)
                taken.append((node, demand))
                placed[pod["metadata"]["name"]] = self.nodes[node].name
            if ok:
                return True
            for i, demand in reversed(taken[mark:]):
                self._give(i, demand)
            del taken[mark:]
            if clique is None:  # the first pod found no node at all
                return False
            excluded.add(clique)

    def _scan(self, pod: dict[str, Any], clique: str | None, excluded: set[str]) -> int | None:
        spec = pod["spec"]
        demand = _demand(pod)
        best = None
        for i, node in enumerate(self.nodes):
            free = self.free[i]
            if (
                free.gpu < demand.gpu
                or free.cpu < demand.cpu
                or free.memory < demand.memory
                or free.storage < demand.storage
            ):
                continue
            label = node.labels.get(CLIQUE)
            if (clique is not None and label != clique) or label in excluded:
                continue
            if not belongs_to(node, spec["nodeSelector"], spec["tolerations"]):
                continue
            if best is None or free.gpu < self.free[best].gpu:
                best = i
        return best

    def _take(self, i: int, demand: Any) -> None:
        f = self.free[i]
        self.free[i] = type(f)(
            f.gpu - demand.gpu, f.cpu - demand.cpu, f.memory - demand.memory,
            f.storage - demand.storage,
        )  # fmt: skip

    def _give(self, i: int, demand: Any) -> None:
        f = self.free[i]
        self.free[i] = type(f)(
            f.gpu + demand.gpu, f.cpu + demand.cpu, f.memory + demand.memory,
            f.storage + demand.storage,
        )  # fmt: skip


def _demand(pod: dict[str, Any]) -> Any:
    from corral.scheduler.resources import pod_demand

    return pod_demand(pod["spec"])


# -- running ---------------------------------------------------------------------------------------


@dataclass
class Result:
    pods: int = 0
    groups: int = 0
    seconds: float = 0.0
    times_ms: list[float] | None = None
    honoured: int = 0
    required_sets: int = 0
    utilisation: float | None = None  # GPU utilisation at the first rejection
    stopped_early: bool = False

    def line(self, name: str) -> str:
        times = self.times_ms or [0.0]
        p50 = statistics.median(times)
        p99 = sorted(times)[min(len(times) - 1, int(len(times) * 0.99))]
        rate = self.pods / self.seconds if self.seconds else 0.0
        honoured = self.honoured / self.required_sets if self.required_sets else 1.0
        util = "-" if self.utilisation is None else f"{self.utilisation:.1%}"
        note = " (stopped by time budget)" if self.stopped_early else ""
        return (
            f"  {name:<9} {self.groups:>6} groups {self.pods:>7} pods {rate:>9.0f} pods/s  "
            f"p50 {p50:7.3f} ms  p99 {p99:8.3f} ms  required honoured {honoured:.0%}  "
            f"GPU util at first rejection {util}{note}"
        )


def _honoured(group: Group, nodes_of: dict[str, str], labels: Callable[[str], str]) -> int:
    return sum(
        1 for names in group.required.values() if len({labels(nodes_of[n]) for n in names}) == 1
    )


def run_corral(nodes: list[Node], stream: Iterator[Group]) -> tuple[Result, list[Group]]:
    snapshot = ClusterSnapshot.from_nodes(nodes, LEVELS)
    by_name = {node.name: node for node in nodes}
    result = Result(times_ms=[])
    fed: list[Group] = []
    placements: list[tuple[Group, Placement]] = []
    total_gpus = sum(snapshot.capacity[i].gpu for i in range(len(nodes)))
    for group in stream:
        fed.append(group)
        start = time.perf_counter()
        outcome = place_group(snapshot, group.pod_group, group.pods)
        if isinstance(outcome, Placement):
            snapshot.bind(outcome.bindings)
        elapsed = time.perf_counter() - start
        if not isinstance(outcome, Placement):
            result.utilisation = 1 - snapshot.root.free_gpu / total_gpus
            break
        result.seconds += elapsed
        result.times_ms.append(elapsed * 1000)  # type: ignore[union-attr]
        result.groups += 1
        result.pods += len(outcome.bindings)
        placements.append((group, outcome))
    for group, placement in placements:
        result.required_sets += len(group.required)
        result.honoured += _honoured(group, placement.nodes(), lambda n: by_name[n].labels[CLIQUE])
    return result, fed


def run_baseline(nodes: list[Node], groups: list[Group], budget: float) -> Result:
    baseline = Baseline(nodes)
    by_name = {node.name: node for node in nodes}
    result = Result(times_ms=[])
    for group in groups:
        if result.seconds > budget:
            result.stopped_early = True
            break
        start = time.perf_counter()
        placed = baseline.place(group)
        elapsed = time.perf_counter() - start
        if placed is None:
            used = sum(GPUS_PER_NODE - f.gpu for f in baseline.free)
            result.utilisation = used / (GPUS_PER_NODE * len(nodes))
            break
        result.seconds += elapsed
        result.times_ms.append(elapsed * 1000)  # type: ignore[union-attr]
        result.groups += 1
        result.pods += len(placed)
        result.required_sets += len(group.required)
        result.honoured += _honoured(group, placed, lambda n: by_name[n].labels[CLIQUE])
    return result


def _prefix(result: Result, groups: int, fed: list[Group]) -> Result:
    """The scheduler's figures over its first ``groups`` placements (same input as the
    baseline's)."""
    times = (result.times_ms or [])[:groups]
    pods = sum(len(group.pods) for group in fed[:groups])
    return Result(pods=pods, groups=len(times), seconds=sum(times) / 1000, times_ms=times)


# -- preemption -----------------------------------------------------------------------------------


def run_preemption(nodes: list[Node], seed: int) -> tuple[Result, Result]:
    """The ``fill`` and ``preempt`` streams of the module docstring on one state."""
    placements = SchedulerCache(nodes, [Queue("bench")], [])
    clock = datetime(2026, 11, 26, tzinfo=UTC)
    by_name = {node.name: node for node in nodes}
    priorities: dict[str, str] = {}

    def stream(priority: str, offset: int) -> tuple[Result, int, int]:
        result = Result(times_ms=[])
        evicted = placed_gpus = 0
        groups: list[Placement] = []
        for index, group in enumerate(gang8_stream(seed + offset)):
            key = f"{priority}-{index}"
            manifests = [{"apiVersion": POD_GROUP_VERSION, **group.pod_group}, *group.pods]
            start = time.perf_counter()
            placements.add(key, manifests, levels=LEVELS, priority=priority, age=(index,))
            passed = place_waiting(placements, clock + timedelta(seconds=offset + index))
            elapsed = time.perf_counter() - start
            if not passed.placed:
                placements.drop(key)  # the stream ends with it: it does not wait on
                total = sum(placements.snapshot(LEVELS).capacity[i].gpu for i in range(len(nodes)))
                result.utilisation = 1 - placements.snapshot(LEVELS).root.free_gpu / total
                break
            for eviction in passed.evicted:
                assert priorities[eviction.group] == "LOW", "only LOW gangs are evicted"
                evicted += eviction.gpus
            priorities[key] = priority
            result.seconds += elapsed
            result.times_ms.append(elapsed * 1000)  # type: ignore[union-attr]
            result.groups += 1
            result.pods += len(passed.placed[0].placement.bindings)
            placed_gpus += passed.placed[0].placement.gpus
            groups.append(passed.placed[0].placement)
        for placement in groups:
            result.required_sets += 1
            cliques = {by_name[node].labels[CLIQUE] for node in placement.nodes().values()}
            result.honoured += len(cliques) == 1
        return result, evicted, placed_gpus

    fill, _, _ = stream("LOW", 0)
    _report_checkpoints(placements, priorities, clock, seed)
    preempt_result, evicted_gpus, high_gpus = stream("HIGH", 10**6)
    print(f"{len(nodes)} nodes x {GPUS_PER_NODE} GPUs, {len(nodes) // NODES_PER_CLIQUE} cliques")
    print(" policy streams through the embedded scheduler's state, one gang per pass")
    print(fill.line("fill"))
    print(preempt_result.line("preempt"))
    with_preemption, without = _rate(preempt_result), _rate(fill)
    print(
        f"  preemption: {evicted_gpus} GPUs of LOW gangs evicted for {preempt_result.groups} "
        f"HIGH gangs of {high_gpus} GPUs; {with_preemption:.0f} pods/s against {without:.0f} "
        f"without preemption ({with_preemption / without:.2f}x)"
    )
    return fill, preempt_result


def _report_checkpoints(
    placements: SchedulerCache, priorities: dict[str, str], clock: datetime, seed: int
) -> None:
    """Every LOW gang of the fill stream (bound at ``clock`` + its index seconds) reports a
    checkpoint at a random moment between its start and the preempt stream's start."""
    rng = random.Random(seed)
    for key, priority in priorities.items():
        if priority == "LOW":
            started = int(key.split("-")[1])
            placements.checkpoint(key, clock + timedelta(seconds=rng.uniform(started, 10**6)))


def run_fault_storm(nodes: list[Node], seed: int, minutes: int) -> None:
    """The fault-storm stream and its no-fault baseline on the same gangs."""
    from benchmarks.fault_storm import LIFETIME, TARGET_BUSY, run_stream

    ticks = minutes * 60
    rate = TARGET_BUSY * len(nodes) * GPUS_PER_NODE / (30 * sum(LIFETIME) / 2)
    gangs = []
    for group in gang8_stream(seed):
        if len(gangs) > rate * ticks * 1.2 + 100:
            break
        manifests = [{"apiVersion": POD_GROUP_VERSION, **group.pod_group}, *group.pods]
        gpus = sum(
            int(p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
            for p in group.pods
        )
        gangs.append((manifests, gpus))
    print(
        f"{len(nodes)} nodes x {GPUS_PER_NODE} GPUs, {len(nodes) // NODES_PER_CLIQUE} cliques, "
        f"{ticks} ticks of 1 s, gang8 arrivals for {TARGET_BUSY:.0%} busy GPUs"
    )
    options = {"levels": LEVELS, "clique": CLIQUE}
    baseline = run_stream(nodes, gangs, ticks, seed, faults=False, **options)
    storm = run_stream(nodes, gangs, ticks, seed, faults=True, **options)
    print(baseline.line("baseline"))
    print(storm.line("fault storm"))
    p99 = storm.p(0.99) / baseline.p(0.99)
    pods = storm.rate / baseline.rate
    print(
        f"  fault storm against no faults: tick p99 {p99:.2f}x (target <= 1.5x), "
        f"pods/s {pods:.2f}x (target >= 0.8x): {'met' if p99 <= 1.5 and pods >= 0.8 else 'MISSED'}"
    )


def _rate(result: Result) -> float:
    return result.pods / result.seconds if result.seconds else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,5000,10000")
    parser.add_argument("--baseline-seconds", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument(
        "--preemption",
        nargs="?",
        const="5000",
        help="run the preemption streams instead, at these sizes (default 5000)",
    )
    parser.add_argument(
        "--fragmentation",
        nargs="?",
        const="1024",
        help="compare the packing orders under churn instead, at these sizes (default 1024)",
    )
    parser.add_argument(
        "--fault-storm",
        nargs="?",
        const="5000",
        help="run the fault-storm streams instead, at these sizes (default 5000)",
    )
    parser.add_argument("--minutes", type=int, default=30, help="cluster time (--fault-storm)")
    parser.add_argument("--seeds", type=int, default=20, help="streams per size (--fragmentation)")
    parser.add_argument("--steps", type=int, default=3000, help="jobs per stream (--fragmentation)")
    args = parser.parse_args()
    streams = {"gang8": gang8_stream, "mixed": mixed_stream}
    if args.fragmentation:
        from benchmarks.fragmentation import compare, verdict

        sizes = [int(s) for s in args.fragmentation.split(",")]
        print(verdict(compare(sizes, args.seeds, args.steps)))
        return
    if args.fault_storm:
        for size in (int(s) for s in args.fault_storm.split(",")):
            run_fault_storm(make_nodes(size), args.seed, args.minutes)
        return
    if args.preemption:
        for size in (int(s) for s in args.preemption.split(",")):
            run_preemption(make_nodes(size), args.seed)
        return
    for size in (int(s) for s in args.sizes.split(",")):
        nodes = make_nodes(size)
        print(f"{size} nodes x {GPUS_PER_NODE} GPUs, {size // NODES_PER_CLIQUE} cliques")
        for name, make_stream in streams.items():
            corral, fed = run_corral(nodes, make_stream(args.seed))
            baseline = run_baseline(nodes, fed, args.baseline_seconds)
            print(f" stream {name}")
            print(corral.line("corral"))
            print(baseline.line("baseline"))
            same = _prefix(corral, baseline.groups, fed)
            if baseline.groups < corral.groups:
                print(same.line("corral*").split("  required")[0] + "  (* same prefix)")
            ratio = (same.pods / same.seconds) / (baseline.pods / baseline.seconds)
            print(f"  speed-up over the baseline on the same groups: {ratio:.0f}x")


if __name__ == "__main__":
    main()
