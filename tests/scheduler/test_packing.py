"""How gangs are packed (scheduler/packing.py, docs/scheduler.md#packing): best fit at the level
asked for with ties broken from the top down, each set in as few child domains as hold it, and
bin packing at the node level."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.scheduler import ClusterSnapshot, Pending, Placement, place_group
from corral.scheduler.packing_policy import Packing
from corral.scheduler.resources import Demand
from corral.scheduler.snapshot import Domain
from tests.scheduler.helpers import (
    CLIQUE,
    LEVELS,
    RACK,
    SPINE,
    ZONE,
    constraint,
    pod,
    pod_group,
    topo_node,
)


def _placed(outcome: Placement | Pending) -> dict[str, str]:
    assert isinstance(outcome, Placement), outcome
    return outcome.nodes()


def _use(snapshot: ClusterSnapshot, name: str, gpus: int) -> None:
    """Take ``gpus`` GPUs of node ``name`` as another job would."""
    snapshot.take(snapshot.index[name], Demand(gpu=gpus))


def test_equal_candidates_go_to_the_fuller_zone() -> None:
    """Three whole cliques tie on free GPUs; the one in zone zb, which is fuller, is taken, so
    zone za stays whole. Before, ties went by id (ca0)."""
    nodes = [
        topo_node("a0", "za", "sa", "ra0", "ca0"),
        topo_node("a1", "za", "sa", "ra0", "ca0"),
        topo_node("a2", "za", "sa", "ra1", "ca1"),
        topo_node("a3", "za", "sa", "ra1", "ca1"),
        topo_node("b0", "zb", "sb", "rb0", "cb0"),
        topo_node("b1", "zb", "sb", "rb0", "cb0"),
        topo_node("b2", "zb", "sb", "rb1", "cb1"),
    ]
    group = pod_group(2, constraint(required=CLIQUE))
    pods = [pod(f"p{i}", gpu=8) for i in range(2)]
    for packing, expected in ((Packing.BEST_FIT, {"b0", "b1"}), (Packing.TIGHTEST, {"a0", "a1"})):
        snapshot = ClusterSnapshot.from_nodes(nodes, LEVELS, packing)
        _use(snapshot, "b2", 4)
        assert set(_placed(place_group(snapshot, group, pods)).values()) == expected


def _spine_of_two_racks() -> ClusterSnapshot:
    """Rack r0: two nodes with 2 of 8 GPUs free (tight); rack r1: two whole 8-GPU nodes."""
    nodes = [
        topo_node("r0-a", "z", "s", "r0", "c0"),
        topo_node("r0-b", "z", "s", "r0", "c0"),
        topo_node("r1-a", "z", "s", "r1", "c1"),
        topo_node("r1-b", "z", "s", "r1", "c1"),
    ]
    snapshot = ClusterSnapshot.from_nodes(nodes, LEVELS)
    _use(snapshot, "r0-a", 6)
    _use(snapshot, "r0-b", 6)
    return snapshot


def test_a_gang_in_a_required_spine_lands_in_one_rack() -> None:
    """4 pods of 2 GPUs: rack r0 holds 2 of them, rack r1 all 4, so all go to r1. Pod by pod
    (before), the first two filled r0's tight holes and the gang spanned both racks."""
    pods = [pod(f"p{i}", gpu=2) for i in range(4)]
    group = pod_group(4, constraint(required=SPINE))
    snapshot = _spine_of_two_racks()
    placed = _placed(place_group(snapshot, group, pods))
    assert {name[:2] for name in placed.values()} == {"r1"}
    assert sorted(placed.values()) == ["r1-a"] * 4  # and there, bin packed on one node
    before = ClusterSnapshot.from_nodes(snapshot.nodes, LEVELS, Packing.TIGHTEST)
    _use(before, "r0-a", 6)
    _use(before, "r0-b", 6)
    assert {name[:2] for name in _placed(place_group(before, group, pods)).values()} == {
        "r0",
        "r1",
    }


def test_a_gang_no_rack_holds_fills_the_roomiest_rack_first() -> None:
    """10 pods of 2 GPUs: rack r1 holds 8 of them, r0 the other 2 (Kueue's order: the child
    that holds the most first, so the gang spans as few racks as it can)."""
    pods = [pod(f"p{i}", gpu=2) for i in range(10)]
    group = pod_group(10, constraint(required=SPINE))
    racks = [name[:2] for name in _placed(place_group(_spine_of_two_racks(), group, pods)).values()]
    assert (racks.count("r1"), racks.count("r0")) == (8, 2)


def test_two_one_gpu_pods_take_two_one_gpu_holes_not_a_whole_node() -> None:
    """The documented node-level trade-off: bin packing (KAI) over fewest nodes (Kueue). Two
    nodes with 1 GPU free and one with 2: the pods take the two 1-GPU holes and leave the
    2-GPU node whole for a 2-GPU pod."""
    nodes = [
        topo_node(name, "z", "s", "r", "c", gpu=gpu)
        for name, gpu in (("one-a", 4), ("one-b", 4), ("two", 2))
    ]
    snapshot = ClusterSnapshot.from_nodes(nodes, LEVELS)
    _use(snapshot, "one-a", 3)
    _use(snapshot, "one-b", 3)
    pods = [pod(f"p{i}", gpu=1) for i in range(2)]
    outcome = place_group(snapshot, pod_group(2, constraint(required=CLIQUE)), pods)
    assert sorted(_placed(outcome).values()) == ["one-a", "one-b"]
    assert isinstance(outcome, Placement)
    snapshot.bind(outcome.bindings)
    assert _placed(place_group(snapshot, pod_group(1), [pod("big", gpu=2)])) == {"big": "two"}


# -- the property ---------------------------------------------------------------------------------

#: Per node: (GPUs, GPUs already taken).
node_states = st.tuples(st.sampled_from((2, 4, 8)), st.integers(0, 8)).map(
    lambda pair: (pair[0], min(pair[1], pair[0]))
)


@st.composite
def clusters(draw: st.DrawFn) -> ClusterSnapshot:
    """2 zones x 2 spines x 2 racks x 2 cliques x 1-3 nodes, some GPUs already taken."""
    nodes, used = [], {}
    for z in range(2):
        for s in range(2):
            for r in range(2):
                for c in range(2):
                    for n in range(draw(st.integers(1, 3))):
                        name = f"n{z}{s}{r}{c}{n}"
                        gpus, taken = draw(node_states)
                        nodes.append(
                            topo_node(
                                name, f"z{z}", f"s{z}{s}", f"r{z}{s}{r}", f"c{z}{s}{r}{c}", gpu=gpus
                            )
                        )
                        used[name] = taken
    packing = draw(st.sampled_from((Packing.BEST_FIT, Packing.TOP_DOWN)))
    snapshot = ClusterSnapshot.from_nodes(nodes, LEVELS, packing)
    for name, taken in used.items():
        if taken:
            _use(snapshot, name, taken)
    return snapshot


@settings(max_examples=300, deadline=None)
@given(
    snapshot=clusters(),
    count=st.integers(1, 8),
    gpu=st.sampled_from((1, 2, 4, 8)),
    required=st.sampled_from((None, ZONE, SPINE, RACK)),
)
def test_a_gang_one_child_domain_could_hold_is_never_split(
    snapshot: ClusterSnapshot, count: int, gpu: int, required: str | None
) -> None:
    """Going down from the domain a gang was placed in (its required level's, or the whole
    topology), at every level: when one child of the domain holding all the gang's pods could
    hold them all, they all land in one child. (Stated exceptions: pods with a preferred node
    affinity, placed pod by pod; and below the finest level, nodes, where bin packing wins.)"""
    pods = [pod(f"p{i}", gpu=gpu) for i in range(count)]
    topology = constraint(required=required) if required else None
    outcome = place_group(snapshot, pod_group(count, topology), pods)
    if isinstance(outcome, Pending):
        return
    nodes = set(outcome.nodes().values())
    domain: Domain = snapshot.topology_root
    if required:
        level = LEVELS.index(required)
        domain = snapshot.by_level[level][outcome.domains[""]]
    while domain.children:
        holders = [child for child in domain.children if child.copies_fitting(gpu) >= count]
        parts = {
            child for child in domain.children if any(_inside(snapshot, n, child) for n in nodes)
        }
        if holders:
            assert len(parts) == 1, (domain.id, [p.id for p in parts], [h.id for h in holders])
        if len(parts) > 1:
            return
        domain = parts.pop()


def _inside(snapshot: ClusterSnapshot, node: str, domain: Domain) -> bool:
    return snapshot.domain_of(node, domain.level) is domain
