"""Which nodes serve which pools, and the resource listing's cells (OSMO §8.4)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from corral.domain.configs.snapshot import Configs
from corral.domain.configs.types import ConfigType
from corral.domain.platform.node_health import Cordon, NodeHealth
from corral.domain.platform.nodes import Node, Taint
from corral.domain.views.resource_listing import (
    GI,
    RESERVED,
    SHARED,
    UNUSED,
    Amounts,
    PoolLayout,
    capacity_of,
    cell,
    list_resources,
    node_info_json,
    pool_layout,
    resources_json,
    used_of,
)
from corral.scheduler.resources import Demand

GPU_TAINT = Taint("nvidia.com/gpu", "NoSchedule", "present")
TOLERATE_GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def make_node(name: str, product: str | None = None, **allocatable: str) -> Node:
    labels = {"gpu.product": product} if product else {}
    taints = (GPU_TAINT,) if product else ()
    resources = {"cpu": "8", "memory": "64Gi", "ephemeral-storage": "100Gi", **allocatable}
    return Node(name, labels, taints, {k.replace("_", "-"): v for k, v in resources.items()})


def selecting(product: str) -> dict[str, Any]:
    return {"spec": {"nodeSelector": {"gpu.product": product}, "tolerations": [TOLERATE_GPU]}}


STATE: dict[ConfigType, dict[str, Any]] = {
    ConfigType.POD_TEMPLATE: {
        "a100": selecting("A100"),
        "h100": selecting("H100"),
        "cpu": {"spec": {"nodeSelector": {}}},
    },
    ConfigType.POOL: {
        "train": {
            "backend": "default",
            "platforms": {
                "a100": {"override_pod_template": ["a100"]},
                "h100": {"override_pod_template": ["h100"], "allowed_mounts": ["/data"]},
            },
        },
        "share": {"backend": "default", "platforms": {"a100": {"override_pod_template": ["a100"]}}},
        "cpu": {"backend": "default", "platforms": {"cpu": {"override_pod_template": ["cpu"]}}},
        "empty": {"backend": "default", "platforms": {}},
    },
}
NODES = [
    make_node("h100-0", "H100", **{"nvidia.com/gpu": "8"}),
    make_node("a100-0", "A100", **{"nvidia.com/gpu": "4"}),
    make_node("cpu-0"),
    make_node("l4-0", "L4", **{"nvidia.com/gpu": "1"}),  # tainted, no platform tolerates it
]


def layout() -> PoolLayout:
    return pool_layout(Configs(STATE), NODES)


def test_membership_follows_selectors_and_taints() -> None:
    found = layout()
    assert found.platforms == {
        ("train", "a100"): ("a100-0",),
        ("train", "h100"): ("h100-0",),
        ("share", "a100"): ("a100-0",),
        ("cpu", "cpu"): ("cpu-0",),  # an empty selector, but GPU nodes are tainted
    }
    assert found.placements("a100-0") == [("train", "a100"), ("share", "a100")]
    assert [found.node_type(n.name) for n in NODES] == [RESERVED, SHARED, RESERVED, UNUSED]


def test_cells_round_used_up_and_capacity_down() -> None:
    node = make_node("n", cpu="7500m", memory="10.5Gi", ephemeral_storage="1000M")
    capacity = capacity_of(node)
    assert capacity == Amounts(storage=0, cpu=7, memory=10, gpu=0)  # 1000M < 1Gi
    used = used_of(Demand(gpu=0, cpu=1001, memory=GI + 1, storage=5), capacity)
    assert used == Amounts(storage=0, cpu=2, memory=2, gpu=0)  # storage clamped to 0
    assert used_of(Demand(cpu=9000), capacity).cpu == 7  # never above capacity
    assert [cell(2, 7, "used"), cell(2, 7, "free"), cell(0, 0, "used"), cell(0, -1, "free")] == [
        "2/7",
        "5",
        "0",
        "0",
    ]


def test_listing_rows_filters_and_sum() -> None:
    requested = {"a100-0": Demand(gpu=2, cpu=1500, memory=3 * GI, storage=GI)}
    listed = list_resources(layout(), NODES, requested, pools=["train", "share"])
    assert [(n.name, n.type, n.placements) for n in listed] == [
        ("a100-0", SHARED, (("train", "a100"), ("share", "a100"))),
        ("h100-0", RESERVED, (("train", "h100"),)),
    ]
    assert listed[0].used == Amounts(storage=1, cpu=2, memory=3, gpu=2)
    assert listed[0].free == Amounts(storage=99, cpu=6, memory=61, gpu=2)
    body = resources_json(listed)
    # a100-0 is listed under two pools but counted once
    assert body["resource_sum"] == {
        "capacity": {"storage": 200, "cpu": 16, "memory": 128, "gpu": 12},
        "used": {"storage": 1, "cpu": 2, "memory": 3, "gpu": 2},
        "free": {"storage": 199, "cpu": 14, "memory": 125, "gpu": 10},
    }
    assert body["resources"][0]["pools"] == [
        {"pool": "train", "platform": "a100"},
        {"pool": "share", "platform": "a100"},
    ]

    only_h100 = list_resources(layout(), NODES, {}, pools=["train"], platforms=["h100"])
    assert [n.name for n in only_h100] == ["h100-0"]
    with_unused = list_resources(layout(), NODES, {}, pools=["cpu"], include_unused=True)
    assert [(n.name, n.type, n.placements) for n in with_unused] == [
        ("cpu-0", RESERVED, (("cpu", "cpu"),)),
        ("l4-0", UNUSED, ()),
    ]
    assert list_resources(layout(), NODES, {}, pools=["empty"]) == []


def test_a_closed_node_is_listed_with_why_and_nothing_free() -> None:
    """docs/health.md: a cordoned node's idle capacity is not free, in its row and the sum."""
    cordoned = replace(NODES[0], health=NodeHealth(cordon=Cordon("alice", "PSU swap")))
    nodes = [cordoned, *NODES[1:]]
    listed = list_resources(layout(), nodes, {}, pools=["train"])
    assert [(n.name, n.closed, n.free.gpu) for n in listed] == [
        ("a100-0", None, 4),
        ("h100-0", "cordoned by alice: 'PSU swap'", 0),
    ]
    body = resources_json(listed)
    assert body["resources"][1]["closed"] == "cordoned by alice: 'PSU swap'"
    assert body["resource_sum"]["free"]["gpu"] == 4
    assert body["resource_sum"]["capacity"]["gpu"] == 12


def test_node_info_shows_only_the_given_pools() -> None:
    h100 = NODES[0]
    info = node_info_json(layout(), h100, Demand(gpu=8), Configs(STATE).pools())
    assert info["type"] == RESERVED
    assert info["used"]["gpu"] == 8 and info["free"]["gpu"] == 0
    assert info["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert info["pools"] == [
        {
            "pool": "train",
            "platform": "h100",
            "description": "",
            "host_network_allowed": False,
            "privileged_allowed": False,
            "default_mounts": [],
            "allowed_mounts": ["/data"],
        }
    ]
    shared = node_info_json(layout(), NODES[1], None, {"share": Configs(STATE).pool("share")})
    assert (shared["type"], [p["pool"] for p in shared["pools"]]) == (SHARED, ["share"])


POOLS = ["train", "share", "cpu", "empty"]


@given(
    st.lists(st.sampled_from(POOLS), unique=True),
    st.booleans(),
    st.dictionaries(
        st.sampled_from([n.name for n in NODES]),
        st.builds(
            Demand,
            st.integers(0, 10),
            st.integers(0, 20_000),
            st.integers(0, 100 * GI),
            st.integers(0, 200 * GI),
        ),
    ),
)
def test_sum_is_the_per_node_totals_counted_once(
    pools: list[str], include_unused: bool, requested: dict[str, Demand]
) -> None:
    listed = list_resources(layout(), NODES, requested, pools=pools, include_unused=include_unused)
    names = [n.name for n in listed]
    assert names == sorted(set(names))  # each node once, sorted
    body = resources_json(listed)
    for key in ("storage", "cpu", "memory", "gpu"):
        capacity = sum(n.capacity.as_json()[key] for n in listed)
        used = sum(n.used.as_json()[key] for n in listed)
        assert body["resource_sum"]["capacity"][key] == capacity
        assert body["resource_sum"]["used"][key] == used
        assert 0 <= used <= capacity
    for entry in listed:
        assert all(pool in pools for pool, _ in entry.placements)
        assert entry.placements or entry.type == UNUSED


NODE_SETS = st.lists(st.lists(st.sampled_from("abcdef"), unique=True).map(tuple), min_size=1)


@given(
    st.lists(
        st.tuples(st.sampled_from(["p", "q", "r"]), st.sampled_from(["x", "y"]), st.integers(0, 9)),
        unique_by=lambda key: key[:2],
    ),
    NODE_SETS,
)
def test_the_layout_index_answers_as_the_platforms_say(
    keys: list[tuple[str, str, int]], node_sets: list[tuple[str, ...]]
) -> None:
    """Platforms sharing one node set (one tuple) are indexed once; what a node serves, its
    pools and its type are still those of every platform listing it, in config order."""
    platforms = {(pool, platform): node_sets[i % len(node_sets)] for pool, platform, i in keys}
    layout = PoolLayout(platforms, {})
    for node in "abcdefg":
        serving = [key for key, names in platforms.items() if node in names]
        pools = tuple(dict.fromkeys(pool for pool, _ in serving))
        assert layout.placements(node) == serving
        assert layout.pools_of(node) == pools
        expected = "UNUSED" if not pools else "RESERVED" if len(pools) == 1 else "SHARED"
        assert layout.node_type(node) == expected
