"""Preemption and reclaim on the embedded scheduler's state (``scheduler/cache.py`` and
``cycle.py`` over ``scheduler/preemption.py``): whole gangs, lower priority only, simulated
first, the cheapest region of the required level, reclaim from borrowing queues only, minimum
runtime."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from corral.domain.platform.nodes import Node
from corral.scheduler import Queue
from corral.scheduler.cache import SchedulerCache
from corral.scheduler.cycle import place_waiting
from corral.scheduler.records import Evicted, PassResult

T0 = datetime(2026, 11, 26, tzinfo=UTC)
ZONE, CLIQUE = "zone", "clique"
LEVELS = (ZONE, CLIQUE)


def tray(name: str, clique: str, gpus: int = 8) -> Node:
    labels = {ZONE: "z", CLIQUE: clique}
    return Node(name, labels, (), {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus)})


def cluster(cliques: int, trays: int) -> list[Node]:
    return [tray(f"c{c}-t{t}", f"c{c}") for c in range(cliques) for t in range(trays)]


def pod(name: str, gpus: int, queue: str, priority: str) -> dict[str, Any]:
    labels = {"kai.scheduler/queue": queue, "osmo.priority": priority.lower()}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]},
    }


def gang(
    key: str, pods: int, gpus: int, queue: str, priority: str, clique: bool = True
) -> list[dict[str, Any]]:
    spec: dict[str, Any] = {"minMember": pods, "queue": queue}
    if clique:
        spec["topologyConstraint"] = {"topology": "t", "requiredTopologyLevel": CLIQUE}
    group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": key},
        "spec": spec,
    }
    return [group, *(pod(f"{key}-{i}", gpus, queue, priority) for i in range(pods))]


class World:
    """A SchedulerCache with a clock: every pass binds what it places."""

    def __init__(self, nodes: list[Node], queues: list[Queue], **kwargs: Any) -> None:
        self.placements = SchedulerCache(nodes, queues, [], **kwargs)
        self.now = T0
        self.age = 0

    def wait(self, key: str, pods: int, gpus: int, queue: str, priority: str, **kw: Any) -> None:
        self.age += 1
        manifests = gang(key, pods, gpus, queue, priority, **kw)
        levels = LEVELS if kw.get("clique", True) else ()
        self.placements.add(key, manifests, levels=levels, priority=priority, age=(self.age,))

    def run(self, key: str, pods: int, gpus: int, queue: str, priority: str, **kw: Any) -> None:
        """Submit and place at once (a second passes)."""
        self.wait(key, pods, gpus, queue, priority, **kw)
        result = self.place()
        assert key in {found.group.key for found in result.placed}, result

    def place(self) -> PassResult:
        self.now += timedelta(seconds=1)
        return place_waiting(self.placements, self.now)


def nodes_of(result: PassResult, key: str) -> set[str]:
    (found,) = [f for f in result.placed if f.group.key == key]
    return set(found.placement.nodes().values())


def test_a_high_clique_gang_evicts_low_work_from_exactly_one_clique() -> None:
    world = World(cluster(cliques=3, trays=2), [Queue("q")])
    for index in range(6):  # each clique holds two LOW gangs, one tray each
        world.run(f"low{index}", 1, 8, "q", "LOW")
    world.wait("high", 2, 8, "q", "HIGH")
    result = world.place()
    # every clique costs 16 GPUs: the youngest victims (low4, low5 in c2) go
    assert result.evicted == [
        Evicted("low5", "high", "q", reclaimed=False, gpus=8),
        Evicted("low4", "high", "q", reclaimed=False, gpus=8),
    ]
    assert nodes_of(result, "high") == {"c2-t0", "c2-t1"}


def test_the_region_that_evicts_the_fewest_gpus_wins_over_the_youngest() -> None:
    world = World(cluster(cliques=2, trays=2), [Queue("q")])
    world.run("old-a", 1, 8, "q", "LOW")  # c0-t0: the tightest fit
    world.run("old-b", 1, 8, "q", "LOW")  # c0-t1
    world.run("young", 1, 8, "q", "LOW")  # c1-t0; c1-t1 stays free
    world.wait("normal", 2, 8, "q", "NORMAL")
    result = world.place()
    assert [e.group for e in result.evicted] == ["young"]
    assert nodes_of(result, "normal") == {"c1-t0", "c1-t1"}


def test_a_victim_is_a_whole_gang_even_across_regions() -> None:
    world = World(cluster(cliques=2, trays=1), [Queue("q")])
    world.run("spread", 2, 8, "q", "LOW", clique=False)  # one pod in each clique
    world.wait("high", 1, 8, "q", "HIGH")
    result = world.place()
    assert result.evicted == [Evicted("spread", "high", "q", reclaimed=False, gpus=16)]
    # the whole gang is gone: its other tray is free again
    world.wait("other", 1, 8, "q", "NORMAL")
    assert {f.group.key for f in world.place().placed} == {"other"}


def test_equal_or_higher_priority_is_never_evicted() -> None:
    world = World(cluster(cliques=1, trays=2), [Queue("q")])
    world.run("normal", 1, 8, "q", "NORMAL")
    world.run("low", 1, 8, "q", "LOW")
    world.wait("low-new", 1, 8, "q", "LOW")
    assert world.place().evicted == []  # LOW evicts nothing, not even LOW
    world.wait("high", 2, 8, "q", "HIGH")
    result = world.place()
    assert result.evicted == [] and result.placed == []  # NORMAL is not preemptible


def test_nothing_is_evicted_when_the_preemptor_would_not_fit_anyway() -> None:
    world = World(cluster(cliques=2, trays=2), [Queue("q")])
    for index in range(4):
        world.run(f"low{index}", 1, 8, "q", "LOW")
    world.wait("huge", 3, 8, "q", "HIGH")  # three trays in one two-tray clique: never
    result = world.place()
    assert result.evicted == [] and result.placed == []
    assert len(world.placements.victim_index) == 4


def test_a_queue_below_its_guarantee_reclaims_what_another_borrows() -> None:
    queues = [Queue("a", gpu_guarantee=24), Queue("b", gpu_guarantee=8)]
    world = World(cluster(cliques=2, trays=2), queues)
    for index in range(4):  # b borrows 24 GPUs above its guarantee of 8
        world.run(f"b{index}", 1, 8, "b", "LOW")
    assert world.placements.usage.borrowed("b") == 24
    world.wait("a-job", 2, 8, "a", "NORMAL")
    result = world.place()
    assert result.evicted == [
        Evicted("b3", "a-job", "a", reclaimed=True, gpus=8),
        Evicted("b2", "a-job", "a", reclaimed=True, gpus=8),
    ]
    assert world.placements.usage.borrowed("b") == 8
    # b is down to 8 borrowed GPUs: reclaim may take one more gang, never below the guarantee
    world.wait("a-more", 1, 8, "a", "NORMAL")
    assert [e.group for e in world.place().evicted] == ["b1"]
    assert world.placements.usage.borrowed("b") == 0
    world.wait("a-over", 1, 8, "a", "LOW")  # LOW evicts nothing; b no longer borrows anyway
    result = world.place()
    assert result.evicted == [] and result.placed == []


def test_a_queue_within_its_guarantee_is_not_reclaimed() -> None:
    queues = [Queue("a", gpu_guarantee=16), Queue("b", gpu_guarantee=32)]
    world = World(cluster(cliques=2, trays=2), queues)
    for index in range(4):
        world.run(f"b{index}", 1, 8, "b", "LOW")
    world.wait("a-job", 1, 8, "a", "NORMAL")
    result = world.place()
    assert result.evicted == [] and result.placed == []


def test_work_younger_than_the_minimum_runtime_is_protected_until_it_is_not() -> None:
    minute = {"q": timedelta(seconds=60)}
    world = World(cluster(cliques=1, trays=1), [Queue("q")], min_runtime=minute)
    world.run("low", 1, 8, "q", "LOW")  # bound at T0 + 1 s
    world.wait("high", 1, 8, "q", "HIGH")
    result = world.place()
    assert result.evicted == [] and result.placed == []
    shape = world.placements.waiting["high"].shape
    assert shape.retry_at == T0 + timedelta(seconds=61)
    world.now = T0 + timedelta(seconds=59)
    assert world.place().tries == 0  # nothing changed, the protection holds: not tried
    world.now = T0 + timedelta(seconds=60)  # the pass runs at 61 s
    result = world.place()
    assert [e.group for e in result.evicted] == ["low"]
