"""Hypothesis state machine: random gangs placed and released on a small topology whose nodes
are closed (NotReady, cordoned) and opened again while pods run on them.

Invariants after every step: no node is over-committed, no new pod goes to a closed node, the
snapshot's incremental aggregates equal a recount from the open nodes, every placement holds all
gang members or nothing changed, and every required level holds (all pods of the set share one
domain at that level).
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from corral.domain.platform.nodes import Node
from corral.scheduler import ClusterSnapshot, Placement, place_group
from corral.scheduler.resources import Demand
from tests.scheduler.helpers import (
    GPU_TAINT,
    GPU_TOLERATION,
    LEVELS,
    constraint,
    node,
    pod,
    pod_group,
    topo_node,
)


def _cluster() -> list[Node]:
    nodes = []
    for z in range(2):
        for s in range(2):
            for c in range(2):
                for n in range(3):
                    gpu = (2, 4, 8)[(z + s + c + n) % 3]
                    nodes.append(
                        topo_node(f"z{z}s{s}c{c}n{n}", f"z{z}", f"s{s}", f"r{c}", f"c{c}", gpu)
                    )
    nodes.append(node("loose", gpu=8))
    nodes.append(node("tainted", gpu=8, taints=(GPU_TAINT,), labels={"kind": "tainted"}))
    return nodes


LEVEL_CHOICES = st.sampled_from([None, *LEVELS])


@st.composite
def gangs(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A PodGroup (with 0 to 3 subgroups) and its pods."""

    def topology() -> dict[str, str] | None:
        required, preferred = draw(LEVEL_CHOICES), draw(LEVEL_CHOICES)
        return constraint(required, preferred) if required or preferred else None

    def pods_of(prefix: str, subgroup: str | None) -> list[dict[str, Any]]:
        gpu = draw(st.sampled_from([0, 1, 2, 4, 8]))
        tolerate = draw(st.booleans())
        return [
            pod(
                f"{prefix}{i}",
                gpu=gpu,
                cpu=draw(st.sampled_from(["500m", "1", "30"])),
                subgroup=subgroup,
                tolerations=[GPU_TOLERATION] if tolerate else None,
            )
            for i in range(draw(st.integers(1, 4)))
        ]

    top = topology()
    count = draw(st.integers(0, 3))
    if count == 0:
        pods = pods_of("p", None)
        return pod_group(draw(st.integers(1, len(pods))), top), pods
    subgroups, pods = [], []
    for k in range(count):
        members = pods_of(f"s{k}-", f"s{k}")
        pods += members
        entry: dict[str, Any] = {"name": f"s{k}", "minMember": len(members)}
        sub = topology()
        if sub:
            entry["topologyConstraint"] = sub
        subgroups.append(entry)
    return pod_group(topology=top, subgroups=subgroups), pods


class Scheduling(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.nodes = _cluster()
        self.snapshot = ClusterSnapshot.from_nodes(self.nodes, LEVELS)
        self.bound: list[Placement] = []
        self.serial = 0

    @rule(gang=gangs())
    def place(self, gang: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
        group, pods = gang
        self.serial += 1
        for manifest in pods:  # unique pod names across groups
            manifest["metadata"]["name"] = f"g{self.serial}-{manifest['metadata']['name']}"
        before = [self.snapshot.free(i) for i in range(len(self.nodes))]
        outcome = place_group(self.snapshot, group, pods)
        assert [self.snapshot.free(i) for i in range(len(self.nodes))] == before
        if not isinstance(outcome, Placement):
            return
        self._check_gang(group, pods, outcome)
        self._check_required(group, pods, outcome)
        closed = [
            b.node for b in outcome.bindings if self.snapshot.closed[self.snapshot.index[b.node]]
        ]
        assert closed == [], f"new pods bound to closed nodes {closed}"
        self.snapshot.bind(outcome.bindings)
        self.bound.append(outcome)

    @rule(data=st.data(), reason=st.sampled_from(["NotReady", "cordoned by alice", None]))
    def close_or_open(self, data: st.DataObject, reason: str | None) -> None:
        """A tray fails, is cordoned or heals while pods run on it (docs/health.md)."""
        name = data.draw(st.sampled_from([n.name for n in self.nodes]))
        self.snapshot.set_closed(name, reason)

    @precondition(lambda self: bool(self.bound))
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(0, len(self.bound) - 1))
        self.snapshot.release(self.bound.pop(index).bindings)

    def _check_gang(
        self, group: dict[str, Any], pods: list[dict[str, Any]], placement: Placement
    ) -> None:
        placed = placement.nodes()
        by_leaf: dict[str, list[str]] = {}
        for manifest in pods:
            leaf = manifest["metadata"]["labels"].get("kai.scheduler/subgroup-name", "")
            by_leaf.setdefault(leaf, []).append(manifest["metadata"]["name"])
        minimum = {s["name"]: s["minMember"] for s in group["spec"].get("subGroups", [])}
        minimum.setdefault("", group["spec"].get("minMember", 1))
        for leaf, names in by_leaf.items():
            assert all(name in placed for name in names[: minimum[leaf]])

    def _check_required(
        self, group: dict[str, Any], pods: list[dict[str, Any]], placement: Placement
    ) -> None:
        placed = placement.nodes()
        labels = {n.name: n.labels for n in self.nodes}
        sets = [("", group["spec"].get("topologyConstraint"))]
        sets += [
            (s["name"], s.get("topologyConstraint")) for s in group["spec"].get("subGroups", [])
        ]
        for name, topology in sets:
            if not topology:
                continue
            members = [
                m["metadata"]["name"]
                for m in pods
                if name in ("", m["metadata"]["labels"].get("kai.scheduler/subgroup-name"))
            ]
            nodes = [placed[m] for m in members if m in placed]
            assert all(all(level in labels[n] for level in LEVELS) for n in nodes)
            required = topology.get("requiredTopologyLevel")
            if required:
                depth = LEVELS.index(required) + 1
                domains = {tuple(labels[n][level] for level in LEVELS[:depth]) for n in nodes}
                assert len(domains) == 1

    @invariant()
    def no_node_is_overcommitted(self) -> None:
        used = [Demand() for _ in self.nodes]
        for placement in self.bound:
            for binding in placement.bindings:
                i = self.snapshot.index[binding.node]
                used[i] = used[i] + binding.demand
        for i, total in enumerate(self.snapshot.capacity):
            assert used[i].gpu <= total.gpu and used[i].cpu <= total.cpu
            assert used[i].memory <= total.memory
            free = self.snapshot.free(i)
            assert free.gpu == total.gpu - used[i].gpu
            assert free.cpu == total.cpu - used[i].cpu

    @invariant()
    def aggregates_match_a_recount(self) -> None:
        snapshot = self.snapshot
        domains = [snapshot.root, snapshot.topology_root, snapshot.unlabelled]
        domains += [d for level in snapshot.by_level for d in level.values()]
        for domain in domains:
            members = [i for i in range(len(self.nodes)) if domain in snapshot.ancestors[i]]
            open_ = [i for i in members if snapshot.closed[i] is None]  # closed: none free
            assert domain.free_gpu == sum(snapshot.free_gpu[i] for i in open_)
            assert domain.free_cpu == sum(snapshot.free_cpu[i] for i in open_)
            histogram = [0] * len(domain.gpu_histogram)
            for i in members:
                histogram[snapshot.free_gpu[i] if snapshot.closed[i] is None else 0] += 1
            assert domain.gpu_histogram == histogram
            if domain.level >= 0:
                assert domain in snapshot.by_free_gpu[domain.level][domain.free_gpu]


Scheduling.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
TestScheduling = Scheduling.TestCase
