"""The pool quota computation (OSMO §8.3) on small hand-built inputs, and its invariants."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from corral.domain.configs.models import Pool
from corral.domain.views.pool_quota import (
    NodeGpus,
    ResourceUsage,
    RunningTask,
    calculate_pool_quotas,
    gpu_quota,
    node_sets,
    pool_minimal,
    quota_json,
    status_of,
)


def pool(guarantee: int | None = None, **extra: Any) -> Pool:
    gpu = None if guarantee is None else {"guarantee": guarantee, "maximum": -1, "weight": 1}
    return Pool.model_validate(
        {"description": "", "backend": "default", "resources": {"gpu": gpu}, **extra}
    )


def node(name: str, gpus: int, *pools: str, usage: int = 0) -> NodeGpus:
    return NodeGpus(name, gpus, usage, pools)


def usage_of(report: Any, name: str) -> ResourceUsage:
    for node_set in report.node_sets:
        for quota in node_set.pools:
            if quota.name == name:
                return quota.usage  # type: ignore[no-any-return]
    raise KeyError(name)


def test_exact_figures_for_two_node_sets_and_an_empty_pool() -> None:
    pools = {"a": pool(10), "b": pool(), "c": pool(4), "d": pool(2)}
    nodes = [
        node("n1", 8, "a", usage=6),
        node("n2", 8, "a", "b", usage=2),
        node("n3", 4, "c", usage=1),
    ]
    tasks = [
        RunningTask("a", 4, "HIGH"),
        RunningTask("a", 2, "low"),  # LOW counts in total usage only
        RunningTask("b", 2, "NORMAL"),
        RunningTask("c", 1, "LOW"),
        RunningTask(None, 8),  # no pool: ignored
        RunningTask("gone", 8),  # unknown pool: ignored
    ]
    report = calculate_pool_quotas(pools, tasks, nodes)
    assert [[q.name for q in s.pools] for s in report.node_sets] == [["a", "b"], ["c"], ["d"]]
    assert usage_of(report, "a") == ResourceUsage(4, 6, 10, 6, 16, 8, 16, 0, 0, 16)
    # b has no quota (-1): its limit is its capacity, of its own node n2 (issue 14: a pool's
    # figures are its own, not its node set's, so they do not change with the pools asked for)
    assert usage_of(report, "b") == ResourceUsage(2, 6, 8, 2, 8, 6, 8, 0, 0, 8)
    assert usage_of(report, "c") == ResourceUsage(0, 4, 4, 1, 4, 3, 4, 0, 0, 4)
    # a pool without nodes: its own node set, capacity 0, quota as configured
    assert usage_of(report, "d") == ResourceUsage(0, 2, 2, 0, 0, 0, 0, 0, 0, 0)
    # quota figures summed per pool; capacity and free per node set (n1, n2 counted once)
    assert report.total == ResourceUsage(6, 18, 24, 9, 20, 11, 28, 0, 0, 20)


def test_a_closed_nodes_idle_gpus_are_neither_used_nor_free() -> None:
    """docs/health.md: a NotReady or cordoned node keeps its capacity in the totals, but
    what its pods do not use is not free either."""
    nodes = [node("n1", 8, "a", usage=2), NodeGpus("n2", 8, 3, ("a",), closed=True)]
    report = calculate_pool_quotas({"a": pool()}, [RunningTask("a", 5, "NORMAL")], nodes)
    found = usage_of(report, "a")
    assert (found.total_capacity, found.total_usage, found.total_free) == (16, 5, 6)
    assert found.healthy_capacity == 8  # healthy against total: n1 only
    assert (report.total.total_capacity, report.total.total_free) == (16, 6)
    assert report.total.healthy_capacity == 8


def test_node_sets_merge_transitively() -> None:
    nodes = [node("n1", 1, "a", "b"), node("n2", 1, "b", "c"), node("n3", 1, "e")]
    assert node_sets(["a", "b", "c", "d", "e"], nodes) == [["a", "b", "c"], ["d"], ["e"]]
    # the chain in any order of the pools, and pools of no node set ignored
    assert node_sets(["c", "e", "a", "b"], [*nodes, node("n4", 1, "x", "a")]) == [
        ["c", "a", "b"],
        ["e"],
    ]
    report = calculate_pool_quotas({"a": pool(), "c": pool(), "b": pool()}, [], nodes[:2])
    assert [s.capacity for s in report.node_sets] == [2]
    assert usage_of(report, "c").quota_limit == 1  # its own node n2


def test_a_pools_figures_do_not_depend_on_the_pools_asked_with_it() -> None:
    """Issue 14: `pool list -p a` and `pool list` (or another caller) give a the same figures."""
    nodes = [node("n1", 4, "a", "b", usage=1), node("n2", 8, "b", "c", usage=2)]
    tasks = [RunningTask("a", 1, "HIGH"), RunningTask("b", 2, "NORMAL")]
    alone = calculate_pool_quotas({"a": pool()}, tasks, nodes)
    together = calculate_pool_quotas({"a": pool(), "b": pool(), "c": pool()}, tasks, nodes)
    assert (
        usage_of(alone, "a")
        == usage_of(together, "a")
        == ResourceUsage(1, 3, 4, 1, 4, 3, 4, 0, 0, 4)
    )


def test_only_the_requested_pools_form_node_sets() -> None:
    """a and c share nodes only through b; without b they are two sets."""
    nodes = [node("n1", 4, "a", "b"), node("n2", 4, "b", "c")]
    report = calculate_pool_quotas({"a": pool(), "c": pool()}, [], nodes)
    assert [[q.name for q in s.pools] for s in report.node_sets] == [["a"], ["c"]]
    assert report.total.total_capacity == 8


def test_duplicate_nodes_count_once_and_over_quota_goes_negative() -> None:
    nodes = [node("n1", 8, "a", usage=8), node("n1", 8, "a", usage=8)]
    report = calculate_pool_quotas({"a": pool(4)}, [RunningTask("a", 8, "HIGH")], nodes)
    assert usage_of(report, "a") == ResourceUsage(8, -4, 4, 8, 8, 0, 8, 4, 0, 8)


def test_defaults_status_and_json_strings() -> None:
    assert gpu_quota(pool()) == {"guarantee": -1, "maximum": -1, "weight": 1}
    assert gpu_quota(pool(3))["guarantee"] == 3
    assert status_of(pool(enable_maintenance=True)) == "MAINTENANCE"
    assert status_of(pool()) == "ONLINE"
    configs = {
        "a": pool(
            10,
            name="a",
            description="pool a",
            platforms={"x": {"description": "X", "allowed_mounts": ["/data"]}},
        ),
        "b": pool(name="b"),
    }
    report = calculate_pool_quotas(configs, [], [node("n1", 8, "a", "b")])
    body = quota_json(report, configs, {"a": {"x": ["/cache"]}})
    assert list(body) == ["node_sets", "resource_sum"]
    first = body["node_sets"][0]["pools"][0]
    assert first["name"] == "a" and first["status"] == "ONLINE"
    assert first["resources"] == {"gpu": {"guarantee": 10, "maximum": -1, "weight": 1}}
    assert first["platforms"] == {
        "x": {
            "description": "X",
            "host_network_allowed": False,
            "privileged_allowed": False,
            "allowed_mounts": ["/data"],
            "default_mounts": ["/cache"],
        }
    }
    assert first["resource_usage"] == {
        "quota_used": "0",
        "quota_free": "10",
        "quota_limit": "10",
        "total_usage": "0",
        "total_capacity": "8",
        "total_free": "8",
        "quota_maximum": "8",
        "borrowed": "0",
        "preempted": "0",
        "healthy_capacity": "8",
    }
    assert body["resource_sum"]["total_capacity"] == "8"  # shared: once
    assert body["resource_sum"]["quota_limit"] == "18"
    assert list(pool_minimal(configs["b"], {}))[:3] == ["name", "description", "status"]


def test_a_pools_queue_figures_maximum_borrowed_and_preempted() -> None:
    """What LOW work uses above the guarantee is borrowed; preempted GPUs come from the store."""
    pools = {"a": pool(4, resources={"gpu": {"guarantee": 4, "maximum": 12, "weight": 1}})}
    tasks = [RunningTask("a", 4, "NORMAL"), RunningTask("a", 6, "LOW")]
    report = calculate_pool_quotas(pools, tasks, [node("n1", 16, "a", usage=10)], {"a": 24})
    assert usage_of(report, "a") == ResourceUsage(4, 0, 4, 10, 16, 6, 12, 6, 24, 16)
    assert report.total.preempted == 24


POOL_NAMES = ["a", "b", "c", "d", "e"]


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[NodeGpus], list[RunningTask]]:
    count = draw(st.integers(0, 8))
    nodes = []
    for index in range(count):
        gpus = draw(st.integers(0, 8))
        served = draw(st.lists(st.sampled_from(POOL_NAMES), max_size=3, unique=True))
        nodes.append(node(f"n{index}", gpus, *served, usage=draw(st.integers(0, gpus))))
    tasks = draw(
        st.lists(
            st.builds(
                RunningTask,
                st.sampled_from([*POOL_NAMES, None]),
                st.integers(0, 8),
                st.sampled_from(["HIGH", "NORMAL", "LOW"]),
            ),
            max_size=10,
        )
    )
    return nodes, tasks


@given(clusters(), st.lists(st.sampled_from(POOL_NAMES), min_size=1, unique=True))
def test_sums_count_every_node_once(
    cluster: tuple[list[NodeGpus], list[RunningTask]], names: list[str]
) -> None:
    nodes, tasks = cluster
    report = calculate_pool_quotas({name: pool() for name in names}, tasks, nodes)
    serving = [n for n in nodes if set(n.pools) & set(names)]
    assert report.total.total_capacity == sum(n.allocatable for n in serving)
    assert report.total.total_free == sum(n.allocatable - n.usage for n in serving)
    assert sorted(q.name for s in report.node_sets for q in s.pools) == sorted(names)
    # every node's (requested) pools are in one node set
    set_of = {q.name: i for i, s in enumerate(report.node_sets) for q in s.pools}
    for n in serving:
        assert len({set_of[p] for p in n.pools if p in set_of}) == 1
    for node_set in report.node_sets:
        for quota in node_set.pools:
            u = quota.usage
            assert u.quota_used <= u.total_usage
            assert u.quota_limit == u.total_capacity  # no guarantee: the set's capacity
            assert u.quota_free == u.quota_limit - u.quota_used
    assert report.total.total_usage == sum(t.gpu for t in tasks if t.pool in names)
    assert report.total.quota_used == sum(
        t.gpu for t in tasks if t.pool in names and t.priority != "LOW"
    )
