"""The scheduling pass: existing bindings and queue usage, fair-share order, LOW outside quota."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from corral.domain.configs.types import ConfigType
from corral.domain.platform.nodes import Node
from corral.scheduler import Pending, Placement, Queue
from corral.services.placement import SchedulingPass, WaitingGroup, pool_queues
from corral.store.cluster_objects import ClusterObject

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


def bound(name: str, node_name: str, gpus: int, queue: str, priority: str) -> ClusterObject:
    body = pod(name, gpus, queue, priority)
    return ClusterObject(
        0, "b", "v1", "Pod", "ns", name, body["metadata"]["labels"], body, node_name
    )


def group(key: str, queue: str, gpus: int, priority: str = "NORMAL", age: int = 0) -> WaitingGroup:
    pod_group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": key},
        "spec": {"minMember": 1, "queue": queue},
    }
    return WaitingGroup(key, (), priority, (age,), [pod_group, pod(key, gpus, queue)])


def test_bound_pods_take_capacity_and_count_against_their_queue_unless_low() -> None:
    queues = [Queue("a", gpu_maximum=8), Queue("b", gpu_maximum=8)]
    existing = [bound("x", "n1", 8, "a", "normal"), bound("y", "n2", 8, "b", "low")]
    scheduling = SchedulingPass([node("n1"), node("n2"), node("n3")], existing, queues)
    assert scheduling.usage.used == {"a": 8, "b": 0}
    refused = scheduling.place(group("g1", "a", 4))
    assert isinstance(refused, Pending)
    assert refused.reason == ("queue a would use 12 GPUs, over its maximum of 8 (8 in use)")
    placed = scheduling.place(group("g2", "b", 8))
    assert isinstance(placed, Placement) and placed.nodes() == {"g2": "n3"}
    assert scheduling.usage.used == {"a": 8, "b": 8}
    low = scheduling.place(group("g3", "a", 8, priority="LOW"))
    assert isinstance(low, Pending)  # no node has room left, but the queue did not refuse it
    assert "queue" not in low.reason


def test_order_puts_queues_below_guarantee_first_then_priority_then_age() -> None:
    queues = [Queue("rich", gpu_guarantee=8, weight=1), Queue("poor", gpu_guarantee=8, weight=1)]
    existing = [bound("x", "n1", 8, "rich", "normal")]
    scheduling = SchedulingPass([node("n1"), node("n2")], existing, queues)
    waiting = [
        group("rich-old", "rich", 1, age=0),
        group("rich-high", "rich", 1, priority="HIGH", age=5),
        group("poor-new", "poor", 1, age=9),
        group("poor-old", "poor", 1, age=1),
    ]
    assert [g.key for g in scheduling.order(waiting)] == [
        "poor-old",
        "poor-new",
        "rich-high",
        "rich-old",
    ]


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
    assert pool_queues(state) == [
        Queue("osmo-pool-team-p", gpu_guarantee=4, gpu_maximum=16, weight=2),
        Queue("osmo-pool-default-q", gpu_guarantee=0, gpu_maximum=None, weight=1),
    ]
