"""A scheduler :class:`Statement` (``scheduler/statement.py``): a discarded statement, or one
rolled back to a checkpoint, leaves the cache exactly as it was at that point: every snapshot's
free capacity, domain sums, histograms and free-GPU index, the queues' counts, the victim index
(in bind order, and by node), the bound groups, checkpoints and generations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.domain.platform.nodes import Node
from corral.scheduler import Binding, ClusterSnapshot, Placement, Queue
from corral.scheduler.cache import SchedulerCache
from corral.scheduler.records import BoundPodOnNode
from corral.scheduler.resources import Demand
from corral.scheduler.statement import Statement, StatementClosed

T0 = datetime(2026, 12, 7, tzinfo=UTC)
LEVELS = (("zone", "rack"), ("rack",), ())
QUEUES = [Queue("a", gpu_guarantee=8, gpu_maximum=None), Queue("b", gpu_guarantee=None)]


def cluster(racks: int) -> list[Node]:
    """Two racks per zone, four nodes per rack, of 4 or 8 GPUs."""
    return [
        Node(
            f"r{rack}-n{index}",
            {"zone": f"z{rack // 2}", "rack": f"r{rack}"},
            (),
            {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": str(4 + 4 * (index % 2))},
        )
        for rack in range(racks)
        for index in range(4)
    ]


@st.composite
def worlds(draw: st.DrawFn) -> tuple[SchedulerCache, list[str]]:
    """A cache with random gangs bound (LOW ones are victims), some with checkpoints."""
    nodes = cluster(draw(st.integers(1, 4)))
    free = {node.name: 4 + 4 * (i % 2) for i, node in enumerate(nodes)}
    bound: list[BoundPodOnNode] = []
    bound_at: dict[str, datetime] = {}
    keys: list[str] = []
    for g in range(draw(st.integers(0, 8))):
        key = f"g{g}"
        queue = draw(st.sampled_from(["a", "b", "none"]))
        labels = {
            "kai.scheduler/queue": queue,
            "osmo.priority": draw(st.sampled_from(["low", "normal"])),
        }
        for p in range(draw(st.integers(1, 3))):
            node = draw(st.sampled_from(sorted(free)))
            gpus = draw(st.integers(0, free[node]))
            free[node] -= gpus
            spec = {
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]
            }
            bound.append(BoundPodOnNode(f"{key}-{p}", node, key, labels, spec))
        bound_at[key] = T0 + timedelta(seconds=draw(st.integers(0, 100)))
        keys.append(key)
    cache = SchedulerCache(nodes, QUEUES, bound, bound_at=bound_at)
    for key in keys:
        if draw(st.booleans()):
            cache.checkpoint(key, T0 + timedelta(seconds=draw(st.integers(100, 200))))
    for levels in LEVELS[: draw(st.integers(1, len(LEVELS)))]:
        cache.snapshot(levels)  # built before the statement: every one must be kept in step
    return cache, keys


def observed(cache: SchedulerCache) -> dict[str, Any]:
    """Everything a discarded statement must leave as it was."""
    return {
        "snapshots": [snapshot_state(cache.snapshot(levels)) for levels in LEVELS],
        "used": dict(cache.usage.used),
        "deserved": dict(cache.usage.deserved),
        "victims": [(v.key, v.bindings, v.since) for v in cache.victim_index.in_bind_order()],
        "victims on": {i: sorted(on) for i, on in cache.victim_index.on_node.items() if on},
        "groups": {
            key: (bindings, queue, preemptible)
            for key, bindings, queue, preemptible in cache.bound_groups()
        },
        "groups on": {node.name: cache.groups_on(node.name) for node in cache.nodes},
        "checkpoints": dict(cache.checkpoints),
        "freshest": list(cache.freshest()),
        "generations": (cache.generation, cache.victim_generation),
    }


def snapshot_state(snapshot: ClusterSnapshot) -> tuple[Any, ...]:
    domains = [
        snapshot.root,
        snapshot.topology_root,
        snapshot.unlabelled,
        *(domain for level in snapshot.by_level for domain in level.values()),
    ]
    return (
        list(snapshot.free_gpu),
        list(snapshot.free_cpu),
        list(snapshot.free_memory),
        list(snapshot.free_pods),
        [
            (d.id, d.free_gpu, d.free_cpu, d.free_memory, d.free_storage, list(d.gpu_histogram))
            for d in domains
        ],
        [
            {free: sorted(d.id for d in ds) for free, ds in level.items()}
            for level in snapshot.by_free_gpu
        ],
    )


def a_placement(cache: SchedulerCache, key: str, queue: str, gpus: int) -> Placement | None:
    """One pod of ``gpus`` GPUs on the first node of the widest snapshot that holds it."""
    snapshot = cache.snapshot(())
    demand = Demand(gpu=gpus, cpu=1000, memory=2**30, pods=1)
    for i, node in enumerate(snapshot.nodes):
        if snapshot.fits(i, demand):
            return Placement((Binding(f"{key}-0", node.name, demand),), {}, (), queue)
    return None


operations = st.lists(
    st.tuples(
        st.sampled_from(["evict", "allocate", "allocate low", "checkpoint", "rollback"]),
        st.integers(0, 20),
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(worlds(), operations)
def test_a_discarded_statement_leaves_the_cache_exactly_as_it_was(
    world: tuple[SchedulerCache, list[str]], steps: list[tuple[str, int]]
) -> None:
    cache, keys = world
    before = observed(cache)
    statement = Statement(cache)
    marks: list[tuple[int, dict[str, Any]]] = []
    for n, (what, pick) in enumerate(steps):
        if what == "evict" and keys:
            statement.evict(keys[pick % len(keys)])  # evicting one already out does nothing
        elif what.startswith("allocate"):
            key = f"new{n}"
            found = a_placement(cache, key, "ab"[pick % 2], pick % 5)
            if found is not None:
                ahead = observed(cache)
                try:
                    statement.allocate(key, found, preemptible=what.endswith("low"), now=T0)
                except ValueError:  # over its queue's guarantee: refused, nothing changed
                    assert observed(cache) == ahead
        elif what == "checkpoint":
            marks.append((statement.checkpoint(), observed(cache)))
        elif marks:
            mark, then = marks.pop()
            statement.rollback(mark)
            assert observed(cache) == then
    statement.discard()
    assert observed(cache) == before


def test_an_eviction_is_seen_by_the_next_operation_and_commit_keeps_both() -> None:
    """Evicting a gang frees its GPUs for the allocation after it; committed, both stay."""
    nodes = cluster(1)[:1]  # one 4-GPU node
    full = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 4}}}]}
    low = {"kai.scheduler/queue": "b", "osmo.priority": "low"}
    cache = SchedulerCache(nodes, QUEUES, [BoundPodOnNode("v-0", nodes[0].name, "v", low, full)])
    statement = Statement(cache)
    assert a_placement(cache, "p", "a", 4) is None
    statement.evict("v")
    placement = a_placement(cache, "p", "a", 4)
    assert placement is not None
    statement.allocate("p", placement, preemptible=False)
    done = statement.commit()
    assert [type(op).__name__ for op in done] == ["Eviction", "Allocation"]
    assert [key for key, *_ in cache.bound_groups()] == ["p"]
    assert cache.usage.used == {"a": 4, "b": 0}
    assert not cache.has_victims
    with pytest.raises(StatementClosed, match="committed or discarded"):
        statement.evict("p")
