"""Placement honours node health (docs/health.md): a gang avoids the clique with a NotReady or
cordoned tray, the wait reason names the closed trays, the could-never-run check still judges
against the whole cluster, and a tray that heals takes work again."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from corral.domain.platform.node_health import Cordon, NodeHealth
from corral.domain.platform.nodes import Node
from corral.scheduler import Pending, Queue, place_group
from corral.scheduler.cache import SchedulerCache
from corral.scheduler.cycle import place_waiting
from corral.scheduler.feasibility import empty_cluster
from corral.scheduler.records import BoundPodOnNode
from tests.scheduler.helpers import CLIQUE, constraint, node, pod, pod_group

NOT_READY = NodeHealth(ready=False, not_ready_reason="KubeletDown")
CORDONED = NodeHealth(cordon=Cordon("alice", "PSU swap"))


def rack(clique: str, trays: int = 9) -> list[Node]:
    """An NVL72 rack: 9 trays of 8 GPUs in one NVLink clique."""
    return [node(f"{clique}-t{i}", labels={CLIQUE: clique}) for i in range(trays)]


def gang(name: str, trays: int = 9) -> list[dict[str, Any]]:
    """A gang of whole trays (9: 72 GPUs) that must run in one clique, as the cache stores
    its objects."""
    group = pod_group(trays, topology=constraint(required=CLIQUE))
    group.update(apiVersion="scheduling.run.ai/v2alpha2", kind="PodGroup")
    pods = [pod(f"{name}-{i}", gpu=8) for i in range(trays)]
    for manifest in pods:
        manifest["apiVersion"] = "v1"
    return [group, *pods]


def with_health(nodes: list[Node], name: str, health: NodeHealth) -> list[Node]:
    return [replace(n, health=health) if n.name == name else n for n in nodes]


def test_a_72_gpu_gang_avoids_the_rack_with_a_not_ready_tray() -> None:
    nodes = with_health(rack("a") + rack("b"), "a-t4", NOT_READY)
    cache = SchedulerCache(nodes, [Queue("q")], [])
    cache.add("g", gang("g"), levels=(CLIQUE,), priority="NORMAL", age=(0,))
    result = place_waiting(cache)
    assert [found.group.key for found in result.placed] == ["g"]
    assert set(result.placed[0].placement.nodes().values()) == {f"b-t{i}" for i in range(9)}


def test_a_gang_that_only_waits_for_closed_trays_is_explained_and_could_run() -> None:
    nodes = with_health(rack("a") + rack("b"), "a-t4", NOT_READY)
    nodes = with_health(nodes, "b-t8", CORDONED)
    cache = SchedulerCache(nodes, [Queue("q")], [])
    cache.add("g", gang("g"), levels=(CLIQUE,), priority="NORMAL", age=(0,))
    result = place_waiting(cache)
    assert result.placed == []
    assert [shape.reason for shape in result.reasons] == [
        "needs room for 9 pods with 8 GPUs each in one nvidia.com/gpu-clique; the roomiest "
        "nvidia.com/gpu-clique, nvidia.com/gpu-clique=a, "
        "has room for 8 (not counted: a-t4 NotReady (KubeletDown); "
        "b-t8 cordoned by alice: 'PSU swap')"
    ]
    # The could-never-run check judges against the whole configured cluster.
    group, *pods = gang("g")
    assert not isinstance(place_group(empty_cluster(nodes, (CLIQUE,)), group, pods), Pending)


def test_a_healed_tray_takes_work_again_and_running_pods_keep_their_place() -> None:
    nodes = rack("a")
    running = BoundPodOnNode("old", "a-t0", "old-group", {}, pod("old", gpu=8)["spec"])
    cache = SchedulerCache(nodes, [Queue("q")], [running])
    cache.set_health("a-t1", CORDONED)
    cache.add("g", gang("g", trays=8), levels=(CLIQUE,), priority="NORMAL", age=(0,))
    assert place_waiting(cache).placed == []  # 7 trays of 9 free: one runs "old", one cordoned
    cache.set_health("a-t1", NodeHealth())
    placed = place_waiting(cache).placed
    assert [found.group.key for found in placed] == ["g"]
    assert "a-t1" in placed[0].placement.nodes().values()
    assert cache.release("old-group")  # the running pod's capacity is given back whole
    assert cache.snapshot((CLIQUE,)).free_gpu[0] == 8
