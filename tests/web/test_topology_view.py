"""The topology page's picture: panels per zone and spine, blocks per clique, free GPUs, each
block's figures from the capacity model (tests/services/test_capacity_model.py holds those to
the scheduler), aggregation at scale, drill-down."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from corral.domain.platform.node_health import Cordon, NodeHealth
from corral.domain.platform.nodes import Node
from corral.domain.views.capacity import TIMES, DomainCapacity, PoolCapacity, QuotaRoom
from corral.web.topology_view import AGGREGATE_ABOVE, UNLABELLED, Level, picture

ZONE = Level("zone", "topology.kubernetes.io/zone")
SPINE = Level("spine", "topology.kubernetes.io/spine")
CLIQUE = Level("gpu-clique", "nvidia.com/gpu-clique")
LEVELS = (ZONE, SPINE, CLIQUE)


def tray(name: str, zone: str, spine: str, clique: str | None, gpus: int = 4) -> Node:
    labels = {ZONE.label: zone, SPINE.label: spine}
    if clique is not None:
        labels[CLIQUE.label] = clique
    return Node(name, labels, (), {"nvidia.com/gpu": str(gpus)})


def draw(nodes: list[Node], levels: tuple[Level, ...] = LEVELS, *args, **kwargs):  # type: ignore[no-untyped-def]
    gpus = {node.name: int(node.allocatable["nvidia.com/gpu"]) for node in nodes}
    return picture(nodes, levels, gpus, *args, **kwargs)


def test_nodes_are_grouped_by_zone_and_spine_then_clique() -> None:
    nodes = [
        tray("b-0", "zb", "s0", "c2"),
        tray("a-1", "za", "s0", "c1"),
        tray("a-0", "za", "s0", "c0"),
        tray("a-2", "za", "s0", "c1"),
    ]
    drawn = draw(nodes, LEVELS, {"a-1": 4, "a-2": 1}, {"a-1": ["w-1"], "a-2": ["w-1", "w-2"]})
    assert [p.title for p in drawn.panels] == ["zone za / spine s0", "zone zb / spine s0"]
    first = drawn.panels[0]
    assert [(b.value, [n.name for n in b.nodes]) for b in first.blocks] == [
        ("c0", ["a-0"]),
        ("c1", ["a-1", "a-2"]),
    ]
    c1 = first.blocks[1]
    assert (c1.gpus, c1.free, c1.owners) == (8, 3, ("w-1", "w-2"))
    assert [(n.label, n.shade) for n in c1.nodes] == [("0/4", "shade-full"), ("3/4", "shade-part")]
    assert [b.key for b in first.blocks] == ["za.s0.c0", "za.s0.c1"]
    assert (drawn.gpus, drawn.free, drawn.aggregated) == (16, 11, False)


def test_a_closed_tray_counts_no_free_gpus_and_says_why_without_colour() -> None:
    cordoned = replace(tray("a-1", "za", "s0", "c1"), health=NodeHealth(cordon=Cordon("alice")))
    drawn = draw([tray("a-0", "za", "s0", "c1"), cordoned], LEVELS, {"a-1": 1}, {})
    block = drawn.panels[0].blocks[0]
    assert [(n.label, n.shade, n.closed) for n in block.nodes] == [
        ("4/4", "shade-free", ""),
        ("✕ 0/4", "shade-closed", "cordoned by alice"),
    ]
    assert (block.free, drawn.free) == (4, 4)


def test_unlabelled_nodes_and_pools_without_levels_still_show() -> None:
    nodes = [tray("x", "za", "s0", None, gpus=0), tray("y", "za", "s0", "c0")]
    drawn = draw(nodes, LEVELS, {}, {})
    assert [b.value for b in drawn.panels[0].blocks] == [UNLABELLED, "c0"]
    assert drawn.panels[0].blocks[0].nodes[0].label == "cpu"
    flat = draw(nodes, (), {}, {})
    assert [p.title for p in flat.panels] == ["all nodes"]
    assert [b.level for b in flat.panels[0].blocks] == [""]


def test_a_large_pool_is_drawn_per_clique_and_a_clique_is_drilled_into() -> None:
    nodes = [
        tray(f"n-{i}", f"z{i % 2}", f"s{i % 4}", f"c{i // 18}") for i in range(AGGREGATE_ABOVE + 50)
    ]
    drawn = draw(nodes, LEVELS, {}, {})
    assert drawn.aggregated
    one = draw(nodes, LEVELS, {}, {}, within=(CLIQUE.label, "c3"))
    assert not one.aggregated
    assert one.nodes == 18
    assert {n.name for p in one.panels for b in p.blocks for n in b.nodes} == {
        f"n-{i}" for i in range(54, 72)
    }


trays = st.lists(
    st.tuples(
        st.sampled_from(["za", "zb"]),
        st.sampled_from(["s0", "s1"]),
        st.sampled_from(["c0", "c1", "c2", None]),
        st.integers(0, 8),
        st.integers(0, 10),
    ),
    max_size=60,
)


@given(trays)
def test_every_node_is_drawn_once_and_the_sums_add_up(found: list[tuple]) -> None:  # type: ignore[type-arg]
    nodes = [tray(f"n{i}", z, s, c, gpus) for i, (z, s, c, gpus, _) in enumerate(found)]
    used = {f"n{i}": u for i, (*_, u) in enumerate(found)}
    drawn = draw(nodes, LEVELS, used, {})
    cells = [n for p in drawn.panels for b in p.blocks for n in b.nodes]
    assert sorted(n.name for n in cells) == sorted(n.name for n in nodes)
    assert all(0 <= n.free <= n.gpus for n in cells)
    assert drawn.free == sum(p.free for p in drawn.panels) == sum(n.free for n in cells)
    assert all(b.capacity is None and b.fits == "" for p in drawn.panels for b in p.blocks)


def test_each_block_takes_its_domains_capacity_by_path_not_by_name() -> None:
    """Two cliques called c0 under two spines are two domains: each block says its own."""
    nodes = [tray("a", "za", "s0", "c0"), tray("b", "za", "s1", "c0")]
    quota = QuotaRoom("p", "NORMAL", 64, 72, 64, 64)
    domains = tuple(
        DomainCapacity("c0", key, 1, 1, 1, 1, 4, 4, 4, 1, fits, False)
        for key, fits in (("za.s0.c0", 0), ("za.s1.c0", 1))
    )
    capacity = PoolCapacity(quota, CLIQUE.label, 8, 8, 8, domains)
    drawn = draw(nodes, LEVELS, {}, {}, capacity=capacity)
    found = {b.key: (b.largest_gang, b.fits) for p in drawn.panels for b in p.blocks}
    assert found == {
        "za.s0.c0": (
            0,
            f"fits now: 0 {TIMES} 4-GPU tasks (1 physically; guarantee 64 for HIGH and NORMAL "
            "work, 64 in use)",
        ),
        "za.s1.c0": (1, f"fits now: 1 {TIMES} 4-GPU task"),
    }
