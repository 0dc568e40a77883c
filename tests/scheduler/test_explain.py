"""The reasons a pending PodGroup gives, word for word."""

from __future__ import annotations

from corral.scheduler import ClusterSnapshot, Pending, place_group
from tests.scheduler.helpers import (
    CLIQUE,
    GPU_TAINT,
    LEVELS,
    constraint,
    node,
    pod,
    pod_group,
    topo_node,
)


def _reason(snapshot: ClusterSnapshot, group: dict, pods: list[dict]) -> str:  # type: ignore[type-arg]
    outcome = place_group(snapshot, group, pods)
    assert isinstance(outcome, Pending), outcome
    return outcome.reason


def test_no_node_matches_the_selector() -> None:
    snapshot = ClusterSnapshot.from_nodes([node("n", labels={"p": "x"}, taints=(GPU_TAINT,))], ())
    wanted = pod("p", selector={"nvidia.com/gpu.product": "NVIDIA-GB200"})
    assert _reason(snapshot, pod_group(1), [wanted]) == (
        "no node matches nodeSelector nvidia.com/gpu.product=NVIDIA-GB200 and tolerates its taints"
    )


def test_no_node_is_big_enough() -> None:
    snapshot = ClusterSnapshot.from_nodes([node("n", gpu=4, cpu="8", memory="1Ki")], ())
    assert _reason(snapshot, pod_group(1), [pod("p", gpu=8, cpu="2", memory="1Ki")]) == (
        "pod p needs 8 GPUs, 2 CPUs, 1Ki memory on one node; no node it may use has that "
        "much even when empty"
    )


def test_required_clique_too_small() -> None:
    nodes = [topo_node(f"n{i}", "z", "s", "r", "c0", gpu=4) for i in range(3)]
    nodes += [topo_node(f"m{i}", "z", "s", "r", "c1", gpu=4) for i in range(2)]
    snapshot = ClusterSnapshot.from_nodes(nodes, LEVELS)
    pods = [pod(f"p{i}", gpu=4) for i in range(4)]
    assert _reason(snapshot, pod_group(4, constraint(required=CLIQUE)), pods) == (
        "needs room for 4 pods with 4 GPUs each in one nvidia.com/gpu-clique; "
        "the roomiest nvidia.com/gpu-clique, nvidia.com/gpu-clique=c0, has room for 3"
    )


def test_gang_larger_than_the_cluster() -> None:
    snapshot = ClusterSnapshot.from_nodes([node("a", gpu=2), node("b", gpu=2)], ())
    pods = [pod(f"p{i}", gpu=2) for i in range(3)]
    assert _reason(snapshot, pod_group(3), pods) == (
        "needs room for 3 pods with 2 GPUs each at once (gang scheduling); "
        "the cluster has room for 2 now"
    )


def test_unknown_level() -> None:
    snapshot = ClusterSnapshot.from_nodes([node("a")], ("rack",))
    assert _reason(snapshot, pod_group(1, constraint(required="zone")), [pod("p")]) == (
        "the PodGroup specifies 'zone' as its required topology level, but the topology has "
        "only rack"
    )


def test_pod_without_its_subgroup() -> None:
    snapshot = ClusterSnapshot.from_nodes([node("a")], ())
    group = pod_group(subgroups=[{"name": "x", "minMember": 1}])
    assert _reason(snapshot, group, [pod("p")]) == (
        "pod p must name a leaf subgroup of its PodGroup in its kai.scheduler/subgroup-name "
        "label, not None"
    )


def test_no_node_is_tolerated() -> None:
    snapshot = ClusterSnapshot.from_nodes([node("n", taints=(GPU_TAINT,))], ())
    assert _reason(snapshot, pod_group(1), [pod("p")]) == (
        "pod p tolerates the taints of no node; add a toleration for them"
    )
