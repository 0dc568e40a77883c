"""The scheduling state kept between ticks: existing bindings and queue usage, fair-share order,
LOW outside the guarantee but within the maximum, shapes tried once until capacity is given back,
preemption and reclaim."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from corral.domain.configs.bundles import parse_bundle
from corral.domain.configs.snapshot import Configs
from corral.domain.configs.types import ConfigType
from corral.domain.labels import POOL as POOL_LABEL
from corral.domain.platform.nodes import Node
from corral.domain.topology.kai_objects import queue_manifests
from corral.files import read_bundle_directory
from corral.scheduler import Queue
from corral.scheduler.cache import SchedulerCache
from corral.scheduler.cycle import place_waiting
from corral.scheduler.queues import pool_queues
from corral.scheduler.records import BoundPodOnNode, Evicted, PassResult
from tests.conftest import REPO
from tests.scheduler.helpers import queue_of

T0 = datetime(2026, 11, 21, tzinfo=UTC)


def node(name: str, gpus: int = 8) -> Node:
    return Node(name, {}, (), {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus)})


def pod(name: str, gpus: int, queue: str, priority: str = "normal") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"kai.scheduler/queue": queue, "osmo.priority": priority},
        },
        "spec": {
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]
        },
    }


def bound(
    name: str, node_name: str, gpus: int, queue: str, priority: str, group: str | None = None
) -> BoundPodOnNode:
    body = pod(name, gpus, queue, priority)
    return BoundPodOnNode(name, node_name, group, body["metadata"]["labels"], body["spec"])


def pod_group(key: str, queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": key},
        "spec": {"minMember": 1, "queue": queue},
    }


def wait(
    placements: SchedulerCache,
    key: str,
    queue: str,
    gpus: int,
    priority: str = "NORMAL",
    age: int = 0,
) -> None:
    manifests = [pod_group(key, queue), pod(key, gpus, queue)]
    placements.add(key, manifests, levels=(), priority=priority, age=(age,))


def placed(result: PassResult) -> dict[str, dict[str, str]]:
    return {found.group.key: found.placement.nodes() for found in result.placed}


def test_bound_pods_count_against_the_maximum_and_only_high_and_normal_against_the_guarantee() -> (
    None
):
    queues = [Queue("a", gpu_maximum=8), Queue("b", gpu_maximum=8)]
    existing = [bound("x", "n1", 8, "a", "normal"), bound("y", "n2", 8, "b", "low", "gy")]
    placements = SchedulerCache([node("n1"), node("n2"), node("n3")], queues, existing)
    assert placements.usage.used == {"a": 8, "b": 8}
    assert placements.usage.deserved == {"a": 8, "b": 0}
    wait(placements, "g1", "a", 4, age=1)
    wait(placements, "g2", "b", 8, age=2)
    wait(placements, "g3", "a", 8, priority="LOW", age=3)
    result = place_waiting(placements)
    # g2 is over b's maximum only because of b's own LOW gang: evicting it makes room
    assert placed(result) == {"g2": {"g2": "n2"}}
    assert result.evicted == [Evicted("gy", "g2", "b", reclaimed=False, gpus=8)]
    assert placements.usage.used == {"a": 8, "b": 8}
    assert placements.usage.deserved == {"a": 8, "b": 8}
    reasons = {shape.key: shape.reason for shape in result.reasons}
    refused = placements.waiting["g1"].shape.key
    assert reasons[refused] == "queue a would use 12 GPUs, over its maximum of 8 (8 in use)"
    low = placements.waiting["g3"].shape.key
    assert reasons[low] == "queue a would use 16 GPUs, over its maximum of 8 (8 in use)"


def test_high_and_normal_work_stays_within_the_guarantee() -> None:
    placements = SchedulerCache([node("n1"), node("n2")], [Queue("q", gpu_guarantee=6)], [])
    wait(placements, "normal", "q", 4, age=0)
    wait(placements, "more", "q", 4, age=1)
    wait(placements, "low", "q", 8, priority="LOW", age=2)
    result = place_waiting(placements)
    assert placed(result) == {"normal": {"normal": "n1"}, "low": {"low": "n2"}}
    assert placements.usage.borrowed("q") == 6
    (reason,) = [shape.reason for shape in result.reasons]
    assert reason == (
        "8 GPUs of HIGH and NORMAL work would be over queue q's guarantee of 6 (4 in use); "
        "submit with --priority LOW to borrow idle GPUs beyond it (the pool has no maximum)"
    )


def test_groups_are_offered_below_guarantee_first_then_priority_then_age() -> None:
    queues = [Queue("rich", gpu_guarantee=9, weight=1), Queue("poor", gpu_guarantee=8, weight=1)]
    existing = [bound("x", "n1", 8, "rich", "normal")]
    placements = SchedulerCache([node("n1"), node("n2", gpus=3)], queues, existing)
    wait(placements, "rich-old", "rich", 1, age=0)
    wait(placements, "rich-high", "rich", 1, priority="HIGH", age=5)
    wait(placements, "poor-new", "poor", 1, age=9)
    wait(placements, "poor-old", "poor", 1, age=1)
    result = place_waiting(placements)
    assert [found.group.key for found in result.placed] == ["poor-old", "poor-new", "rich-high"]
    assert list(placements.waiting) == ["rich-old"]


def test_a_shape_that_does_not_fit_is_tried_once_per_pass_until_capacity_is_given_back() -> None:
    placements = SchedulerCache([node("n1")], [Queue("q")], [])
    for index in range(5):
        wait(placements, f"g{index}", "q", 8, age=index)
    first = place_waiting(placements)
    assert placed(first) == {"g0": {"g0": "n1"}} and first.tries == 2
    (shape,) = {placements.waiting[f"g{i}"].shape.key for i in range(1, 5)}
    assert [s.key for s in first.reasons] == [shape]
    again = place_waiting(placements)
    assert again.tries == 0 and again.placed == [] and again.reasons == []
    assert placements.release("g0")
    after = place_waiting(placements)
    assert placed(after) == {"g1": {"g1": "n1"}} and after.tries == 2


def test_a_group_placed_with_a_shape_read_from_another_gets_its_own_pod_names() -> None:
    placements = SchedulerCache([node("n1"), node("n2")], [Queue("q")], [])
    wait(placements, "first", "q", 8, age=0)
    wait(placements, "second", "q", 8, age=1)
    assert placements.waiting["first"].shape is placements.waiting["second"].shape
    assert placed(place_waiting(placements)) == {
        "first": {"first": "n1"},
        "second": {"second": "n2"},
    }


def test_a_group_no_longer_waiting_is_not_placed() -> None:
    placements = SchedulerCache([node("n1")], [Queue("q")], [])
    wait(placements, "canceled", "q", 8, age=0)
    wait(placements, "next", "q", 8, age=1)
    placements.drop("canceled")
    assert placed(place_waiting(placements)) == {"next": {"next": "n1"}}


def test_pool_queues_follow_the_pool_quota_and_backend_namespace() -> None:
    state = {
        ConfigType.BACKEND: {"k": {"k8s_namespace": "team"}},
        ConfigType.POOL: {
            "p": {
                "backend": "k",
                "resources": {"gpu": {"guarantee": 4, "maximum": 16, "weight": 2}},
            },
            "q": {"backend": "missing"},
        },
    }
    assert pool_queues(Configs(state)) == [
        Queue("osmo-pool-team-p", gpu_guarantee=4, gpu_maximum=16, weight=2, pool="p"),
        Queue("osmo-pool-default-q", gpu_guarantee=None, gpu_maximum=None, weight=1, pool="q"),
    ]


def test_the_embedded_queues_are_the_queue_manifests_the_kubernetes_backend_syncs() -> None:
    """Read from the configs directly, the queues say what the synced Queue manifests say:
    name, guarantee, maximum, weight and pool, for every backend of the example configs."""
    bundle, _ = read_bundle_directory(REPO / "examples" / "configs")
    configs = Configs(parse_bundle(bundle).items)
    from_manifests = [
        queue_of(manifest)
        for backend in sorted({pool.backend for pool in configs.pools().values()})
        for manifest in queue_manifests(configs, backend)
        if POOL_LABEL in manifest["metadata"]["labels"]
    ]
    assert len(from_manifests) == len(configs.pools()) > 5
    assert pool_queues(configs) == from_manifests
