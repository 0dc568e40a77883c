"""Seed 003's four use cases on the example cluster, with the manifests a dry run stores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from corral.domain.cluster.description import Cluster, parse_cluster
from corral.scheduler import ClusterSnapshot, Placement, place_group
from corral.scheduler.resources import Demand
from corral.services.runtime import load_examples, open_runtime
from corral.services.submission import Mode, SubmitRequest, SubmittingUser
from tests.scheduler.helpers import CLIQUE, LEVELS, RACK, SPINE, ZONE

REPO = Path(__file__).resolve().parents[2]
Manifests = tuple[dict[str, Any], list[dict[str, Any]]]


@pytest.fixture(scope="module")
def cluster() -> Cluster:
    return parse_cluster((REPO / "examples/clusters/example.yaml").read_text())


@pytest.fixture(scope="module")
def manifests(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Manifests]:
    """PodGroup and Pods of each nvl72 example, from a dry-run submission."""
    database = tmp_path_factory.mktemp("db") / "corral.db"
    runtime = open_runtime(f"sqlite:///{database}")
    load_examples(runtime, REPO / "examples/configs")
    user = SubmittingUser("alice", True, lambda a, b: None)
    found = {}
    for example in ("single-rack", "two-instances", "one-zone", "best-effort"):
        text = (REPO / f"examples/workflows/nvl72-{example}.yaml").read_text()
        outcome = runtime.submissions.submit(
            user, SubmitRequest(pool="nvl72", file=text), Mode.DRY_RUN
        )
        assert outcome.plan is not None
        group = outcome.plan.groups[0].manifests
        pod_group = next(m for m in group if m["kind"] == "PodGroup")
        found[example] = (pod_group, [m for m in group if m["kind"] == "Pod"])
    return found


def _place(snapshot: ClusterSnapshot, manifests: Manifests) -> Placement:
    outcome = place_group(snapshot, *manifests)
    assert isinstance(outcome, Placement), outcome
    return outcome


def _labels(cluster: Cluster, placement: Placement, label: str, pods: list[str]) -> set[str]:
    nodes = placement.nodes()
    found = cluster.node
    return {found(nodes[name]).labels[label] for name in pods}  # type: ignore[union-attr]


def _subgroup_pods(pods: list[dict[str, Any]]) -> dict[str, list[str]]:
    by_subgroup: dict[str, list[str]] = {}
    for manifest in pods:
        label = manifest["metadata"]["labels"].get("kai.scheduler/subgroup-name", "")
        by_subgroup.setdefault(label, []).append(manifest["metadata"]["name"])
    return by_subgroup


def _fill(snapshot: ClusterSnapshot, nodes: list[str]) -> None:
    """Take every free GPU of ``nodes`` (other work running there)."""
    for name in nodes:
        i = snapshot.index[name]
        snapshot.take(i, Demand(gpu=snapshot.free_gpu[i]))


def test_single_rack_lands_in_one_clique(cluster: Cluster, manifests: dict[str, Manifests]) -> None:
    snapshot = ClusterSnapshot.from_nodes(cluster.nodes, LEVELS)
    _, pods = manifests["single-rack"]
    placement = _place(snapshot, manifests["single-rack"])
    names = [p["metadata"]["name"] for p in pods]
    assert len(placement.bindings) == 4
    assert len(_labels(cluster, placement, CLIQUE, names)) == 1
    assert all(node.startswith("gb200-") for node in placement.nodes().values())


def test_two_instances_each_in_one_clique(
    cluster: Cluster, manifests: dict[str, Manifests]
) -> None:
    snapshot = ClusterSnapshot.from_nodes(cluster.nodes, LEVELS)
    _, pods = manifests["two-instances"]
    placement = _place(snapshot, manifests["two-instances"])
    subgroups = _subgroup_pods(pods)
    assert len(subgroups) == 2
    for names in subgroups.values():
        assert len(_labels(cluster, placement, CLIQUE, names)) == 1


def test_two_instances_in_different_cliques_when_one_clique_is_too_small(
    cluster: Cluster, manifests: dict[str, Manifests]
) -> None:
    snapshot = ClusterSnapshot.from_nodes(cluster.nodes, LEVELS)
    # Leave every clique room for exactly one instance (4 free trays).
    for node in cluster.nodes:
        if node.name.startswith("gb200-") and int(node.name[-2:]) >= 4:
            _fill(snapshot, [node.name])
    _, pods = manifests["two-instances"]
    placement = _place(snapshot, manifests["two-instances"])
    cliques = [
        _labels(cluster, placement, CLIQUE, names) for names in _subgroup_pods(pods).values()
    ]
    assert all(len(found) == 1 for found in cliques)
    assert cliques[0] != cliques[1]


def test_one_zone_lands_in_the_only_zone_big_enough(
    cluster: Cluster, manifests: dict[str, Manifests]
) -> None:
    snapshot = ClusterSnapshot.from_nodes(cluster.nodes, LEVELS)
    # zone-b's only clique keeps room for one instance: only zone-a can hold both.
    _fill(snapshot, [f"gb200-zone-b-s0-r0-g0-{i:02d}" for i in range(4, 18)])
    _, pods = manifests["one-zone"]
    placement = _place(snapshot, manifests["one-zone"])
    all_pods = [p["metadata"]["name"] for p in pods]
    assert _labels(cluster, placement, ZONE, all_pods) == {"zone-a"}
    for names in _subgroup_pods(pods).values():
        assert len(_labels(cluster, placement, CLIQUE, names)) == 1
    assert placement.domains[""] == "zone-a"


def test_one_zone_prefers_the_tighter_zone_when_both_fit(
    cluster: Cluster, manifests: dict[str, Manifests]
) -> None:
    snapshot = ClusterSnapshot.from_nodes(cluster.nodes, LEVELS)
    placement = _place(snapshot, manifests["one-zone"])
    assert placement.domains[""] == "zone-b"  # 72 free GPUs: tighter than zone-a's 288


def test_best_effort_schedules_even_when_preferences_cannot_be_met(
    cluster: Cluster, manifests: dict[str, Manifests]
) -> None:
    snapshot = ClusterSnapshot.from_nodes(cluster.nodes, LEVELS)
    # Leave 2 free trays per rack: no rack (preferred per instance) holds an instance of 4
    # trays, and no spine (preferred for the whole group, 4 free trays) holds all 8.
    for node in cluster.nodes:
        if node.name.startswith("gb200-") and int(node.name[-2:]) >= 2:
            _fill(snapshot, [node.name])
    _, pods = manifests["best-effort"]
    placement = _place(snapshot, manifests["best-effort"])
    assert len(placement.bindings) == 8
    for names in _subgroup_pods(pods).values():
        assert len(_labels(cluster, placement, RACK, names)) == 2  # preference not met
    assert len(_labels(cluster, placement, SPINE, [p["metadata"]["name"] for p in pods])) > 1


def test_best_effort_keeps_instances_in_a_rack_when_it_can(
    cluster: Cluster, manifests: dict[str, Manifests]
) -> None:
    snapshot = ClusterSnapshot.from_nodes(cluster.nodes, LEVELS)
    _, pods = manifests["best-effort"]
    placement = _place(snapshot, manifests["best-effort"])
    for names in _subgroup_pods(pods).values():
        assert len(_labels(cluster, placement, RACK, names)) == 1


def test_placing_does_not_change_the_snapshot_until_bound(
    cluster: Cluster, manifests: dict[str, Manifests]
) -> None:
    snapshot = ClusterSnapshot.from_nodes(cluster.nodes, LEVELS)
    before = snapshot.root.free_gpu
    placement = _place(snapshot, manifests["single-rack"])
    assert snapshot.root.free_gpu == before
    snapshot.bind(placement.bindings)
    assert snapshot.root.free_gpu == before - 16
    snapshot.release(placement.bindings)
    assert snapshot.root.free_gpu == before
