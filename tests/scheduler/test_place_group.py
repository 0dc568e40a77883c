"""``place_group`` on a snapshot, case by case: filtering by selectors and taints, resources,
gangs, required and preferred levels, candidate order, queue limits."""

from __future__ import annotations

from corral.domain.platform.nodes import Taint
from corral.scheduler import ClusterSnapshot, Pending, Placement, Queue, QueueUsage, place_group
from corral.scheduler.packing_policy import Packing
from tests.scheduler.helpers import (
    CLIQUE,
    GPU_TAINT,
    GPU_TOLERATION,
    LEVELS,
    RACK,
    SPINE,
    ZONE,
    constraint,
    node,
    pod,
    pod_group,
    topo_node,
)


def _placed(outcome: Placement | Pending) -> dict[str, str]:
    assert isinstance(outcome, Placement), outcome
    return outcome.nodes()


def test_node_selector_and_taints_filter_nodes() -> None:
    nodes = [
        node("plain", labels={"product": "a"}),
        node("tainted", labels={"product": "a"}, taints=(GPU_TAINT,)),
        node("other", labels={"product": "b"}, taints=(GPU_TAINT,)),
    ]
    snapshot = ClusterSnapshot.from_nodes(nodes, ())
    wanted = pod("p", selector={"product": "b"}, tolerations=[GPU_TOLERATION])
    assert _placed(place_group(snapshot, pod_group(1), [wanted])) == {"p": "other"}
    untolerated = pod("p", selector={"product": "b"})
    assert isinstance(place_group(snapshot, pod_group(1), [untolerated]), Pending)


def test_prefer_no_schedule_taints_do_not_block() -> None:
    soft = Taint("dedicated", "PreferNoSchedule", "x")
    snapshot = ClusterSnapshot.from_nodes([node("n", taints=(soft,))], ())
    assert _placed(place_group(snapshot, pod_group(1), [pod("p")])) == {"p": "n"}


def test_resources_sum_containers_and_use_limits_without_requests() -> None:
    snapshot = ClusterSnapshot.from_nodes([node("small", gpu=2), node("big", gpu=4)], ())
    two_containers = pod("p", gpu=2)
    two_containers["spec"]["containers"].append(dict(two_containers["spec"]["containers"][0]))
    assert _placed(place_group(snapshot, pod_group(1), [two_containers])) == {"p": "big"}
    limits_only = pod("q", gpu=3, use_limits=True)
    assert _placed(place_group(snapshot, pod_group(1), [limits_only])) == {"q": "big"}


def test_cpu_and_memory_are_exact() -> None:
    snapshot = ClusterSnapshot.from_nodes([node("n", cpu="1.5", memory="1Gi", gpu=0)], ())
    fits = [pod("a", gpu=0, cpu="500m", memory="512Mi"), pod("b", gpu=0, cpu="1", memory="512Mi")]
    assert len(_placed(place_group(snapshot, pod_group(2), fits))) == 2
    too_much = [pod("a", gpu=0, cpu="501m"), pod("b", gpu=0, cpu="1")]
    assert isinstance(place_group(snapshot, pod_group(2), too_much), Pending)


def test_binpacks_onto_the_fullest_node_that_fits() -> None:
    snapshot = ClusterSnapshot.from_nodes([node("a", gpu=8), node("b", gpu=2)], ())
    assert _placed(place_group(snapshot, pod_group(1), [pod("p", gpu=2)])) == {"p": "b"}


def test_gang_is_all_or_nothing() -> None:
    snapshot = ClusterSnapshot.from_nodes([node("a", gpu=4), node("b", gpu=4)], ())
    pods = [pod(f"p{i}", gpu=3) for i in range(3)]
    outcome = place_group(snapshot, pod_group(3), pods)
    assert isinstance(outcome, Pending)
    assert snapshot.root.free_gpu == 8


def test_pods_beyond_min_member_are_best_effort() -> None:
    snapshot = ClusterSnapshot.from_nodes([node("a", gpu=4), node("b", gpu=4)], ())
    pods = [pod(f"p{i}", gpu=3) for i in range(3)]
    outcome = place_group(snapshot, pod_group(2), pods)
    assert isinstance(outcome, Placement)
    assert len(outcome.bindings) == 2
    assert outcome.unplaced == ("p2",)


def _two_zones() -> ClusterSnapshot:
    """zone-a: 2 cliques of 2 nodes; zone-b: 1 clique of 3 nodes; 8 GPUs per node."""
    nodes = [
        topo_node("a0", "za", "sa", "ra0", "ca0"),
        topo_node("a1", "za", "sa", "ra0", "ca0"),
        topo_node("a2", "za", "sa", "ra1", "ca1"),
        topo_node("a3", "za", "sa", "ra1", "ca1"),
        topo_node("b0", "zb", "sb", "rb0", "cb0"),
        topo_node("b1", "zb", "sb", "rb0", "cb0"),
        topo_node("b2", "zb", "sb", "rb0", "cb0"),
        node("loose", gpu=8),  # no topology labels
    ]
    return ClusterSnapshot.from_nodes(nodes, LEVELS)


def test_required_level_picks_the_tightest_domain_that_fits() -> None:
    snapshot = _two_zones()
    pods = [pod(f"p{i}", gpu=8) for i in range(2)]
    placed = _placed(place_group(snapshot, pod_group(2, constraint(required=CLIQUE)), pods))
    assert set(placed.values()) == {"a0", "a1"}  # ca0 (16 free) before cb0 (24)
    three = [pod(f"p{i}", gpu=8) for i in range(3)]
    placed = _placed(place_group(snapshot, pod_group(3, constraint(required=CLIQUE)), three))
    assert set(placed.values()) == {"b0", "b1", "b2"}
    top_down = ClusterSnapshot.from_nodes(snapshot.nodes, LEVELS, Packing.TOP_DOWN)
    placed = _placed(place_group(top_down, pod_group(2, constraint(required=CLIQUE)), pods))
    assert set(placed.values()) == {"b0", "b1"}  # KAI's: zone zb (24 free) is the fuller


def test_required_level_never_spills_over() -> None:
    snapshot = _two_zones()
    four = [pod(f"p{i}", gpu=8) for i in range(4)]
    outcome = place_group(snapshot, pod_group(4, constraint(required=CLIQUE)), four)
    assert isinstance(outcome, Pending)
    placed = _placed(place_group(snapshot, pod_group(4, constraint(required=ZONE)), four))
    assert set(placed.values()) == {"a0", "a1", "a2", "a3"}


def test_constrained_pods_avoid_nodes_without_topology_labels() -> None:
    snapshot = _two_zones()
    for name in ("a0", "a1", "a2", "a3", "b0", "b1", "b2"):
        snapshot.take(snapshot.index[name], snapshot.free(snapshot.index[name]))
    outcome = place_group(snapshot, pod_group(1, constraint(preferred=RACK)), [pod("p")])
    assert isinstance(outcome, Pending)
    assert _placed(place_group(snapshot, pod_group(1), [pod("p")])) == {"p": "loose"}


def test_preferred_level_falls_back_level_by_level() -> None:
    snapshot = _two_zones()
    # 4 whole nodes: no clique or rack holds them; spine sa does.
    four = [pod(f"p{i}", gpu=8) for i in range(4)]
    outcome = place_group(snapshot, pod_group(4, constraint(preferred=CLIQUE)), four)
    assert isinstance(outcome, Placement)
    assert outcome.domains[""] == "za.sa"
    # 5 whole nodes: no zone holds them; anywhere in the topology (not the unlabelled node).
    five = [pod(f"p{i}", gpu=8) for i in range(5)]
    outcome = place_group(snapshot, pod_group(5, constraint(preferred=CLIQUE)), five)
    assert isinstance(outcome, Placement)
    assert outcome.domains[""] == "topology"
    assert "loose" not in outcome.nodes().values()


def test_required_and_preferred_search_from_preferred_up_to_required() -> None:
    snapshot = _two_zones()
    three = [pod(f"p{i}", gpu=8) for i in range(3)]
    group = pod_group(3, constraint(required=ZONE, preferred=CLIQUE))
    outcome = place_group(snapshot, group, three)
    assert isinstance(outcome, Placement)
    assert outcome.domains[""] == "zb.sb.rb0.cb0"  # the only clique with 3 free nodes


def test_nested_subgroups_stay_inside_their_parents_domain() -> None:
    snapshot = _two_zones()
    subgroups = [
        {"name": "x", "minMember": 2, "topologyConstraint": constraint(required=CLIQUE)},
        {"name": "y", "minMember": 2, "topologyConstraint": constraint(required=CLIQUE)},
    ]
    group = pod_group(topology=constraint(required=ZONE), subgroups=subgroups)
    pods = [pod(f"{s}{i}", gpu=8, subgroup=s) for s in "xy" for i in range(2)]
    outcome = place_group(snapshot, group, pods)
    assert isinstance(outcome, Placement)
    assert outcome.domains[""] == "za"
    assert {outcome.domains["x"], outcome.domains["y"]} == {"za.sa.ra0.ca0", "za.sa.ra1.ca1"}


def test_a_failed_candidate_is_rolled_back_before_the_next() -> None:
    snapshot = _two_zones()
    # ca0 passes the GPU fit test but its nodes lack the selected label: next candidate.
    pods = [pod(f"p{i}", gpu=8, selector={SPINE: "sb"}) for i in range(2)]
    placed = _placed(place_group(snapshot, pod_group(2, constraint(required=CLIQUE)), pods))
    assert set(placed.values()) <= {"b0", "b1", "b2"}
    assert snapshot.root.free_gpu == 64


def test_parent_subgroups_and_cycles() -> None:
    snapshot = _two_zones()
    subgroups = [
        {"name": "top", "minMember": 1, "topologyConstraint": constraint(required=ZONE)},
        {"name": "leaf", "minMember": 2, "parent": "top"},
    ]
    pods = [pod(f"p{i}", subgroup="leaf") for i in range(2)]
    outcome = place_group(snapshot, pod_group(subgroups=subgroups), pods)
    assert isinstance(outcome, Placement)
    assert set(outcome.domains) == {"", "top", "leaf"}
    cycle = [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]
    outcome = place_group(snapshot, pod_group(subgroups=cycle), [])
    assert outcome == Pending("the PodGroup's subgroups form a cycle")


def test_queue_maximum_keeps_a_group_pending() -> None:
    snapshot = ClusterSnapshot.from_nodes([node("a", gpu=8)], ())
    queues = QueueUsage([Queue("q", gpu_maximum=6)])
    first = place_group(snapshot, pod_group(1), [pod("p", gpu=4)], queues)
    assert isinstance(first, Placement)
    assert (first.queue, first.gpus) == ("q", 4)
    snapshot.bind(first.bindings)
    queues.charge(first.queue, first.gpus)
    assert place_group(snapshot, pod_group(1), [pod("r", gpu=4)], queues) == Pending(
        "queue q would use 8 GPUs, over its maximum of 6 (4 in use)"
    )
    queues.refund(first.queue, first.gpus)
    assert isinstance(place_group(snapshot, pod_group(1), [pod("r", gpu=4)], queues), Placement)


def test_a_group_over_its_pools_guarantee_is_told_how_to_borrow() -> None:
    """The reason names the pool and what to do (issue 25, item 17), not only the queue."""
    queue = Queue("osmo-pool-default-nvl72", gpu_guarantee=64, gpu_maximum=72, pool="nvl72")
    usage = QueueUsage([queue])
    assert usage.refusal(queue.name, 72) == (
        "72 GPUs of HIGH and NORMAL work would be over pool nvl72's guarantee of 64 (0 in use); "
        "submit with --priority LOW to borrow idle GPUs up to its maximum of 72"
    )
    assert usage.refusal(queue.name, 72, preemptible=True) is None
    assert usage.refusal(queue.name, 80, preemptible=True) == (
        "pool nvl72 would use 80 GPUs, over its maximum of 72 (0 in use)"
    )
