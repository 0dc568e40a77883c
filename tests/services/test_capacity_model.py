"""Every view's "fits now" is what the scheduler would place at once (docs/resources.md#what-
fits-now): over random clusters of NVL72 racks, pool quotas, node health and running work, the
capacity model's figures, the topology page's blocks, ``pool shapes``, the overview's free GPUs
and the queue's "Borrows" are checked against ``gang.place_pod_set`` itself, on the same
snapshot and queue usage.

For nvl72 at guarantee 64, maximum 72 and 64 in use, the overview said 292 GPUs free and the
topology page "fits now: 18 x 4-GPU tasks", while a 16-tray gang waited, over the maximum;
``pool shapes`` called a clique with a fabric-failed tray "whole free". The checks below fail on
that code."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from benchmarks.control_plane import gb200_cluster_yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.backends.port import BoundPod
from corral.domain.cluster.description import parse_cluster
from corral.domain.configs.bundles import parse_bundle
from corral.domain.configs.snapshot import Configs
from corral.domain.configs.types import ConfigType
from corral.domain.labels import GROUP_UUID, POOL, PRIORITY, QUEUE, WORKFLOW_ID
from corral.domain.platform.node_health import Cordon, Fabric, NodeHealth
from corral.domain.topology.fabric import fabric_rule
from corral.domain.topology.podgroup import queue_name
from corral.domain.views.capacity import PoolCapacity
from corral.domain.views.queue import queue_entries
from corral.domain.views.requested_shape import RequestedShape
from corral.domain.workflows.record import StoredGroup, StoredWorkflow
from corral.files import read_bundle_directory
from corral.scheduler.gang import Placement, place_pod_set
from corral.scheduler.podgroup import read_pod_group
from corral.services.capacity import EMBEDDED, ClusterCapacity
from corral.services.capacity_model import pool_capacities, pool_capacity, scheduler_state
from corral.services.free_shapes import pool_shapes
from corral.web.topology_data import pool_picture
from corral.web.topology_view import Level
from tests.conftest import REPO

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
CLIQUE = "nvidia.com/gpu-clique"
NAMESPACE = "default"  # the example backend's (k8s_namespace)
EXAMPLES = Configs(parse_bundle(read_bundle_directory(REPO / "examples" / "configs")[0]).items)
#: The GB200 pools of the examples: nvl72 with a quota, my-pool without one.
POOLS = ("my-pool", "nvl72")
HEALTHS = {
    "healthy": NodeHealth(),
    "cordoned": NodeHealth(cordon=Cordon("admin", "PSU")),
    "not ready": NodeHealth(ready=False),
    "fabric failed": NodeHealth(fabric=Fabric.FAILED),
    "fabric degraded": NodeHealth(fabric=Fabric.DEGRADED),
}


@dataclasses.dataclass(frozen=True)
class World:
    configs: Configs
    cluster: ClusterCapacity

    @property
    def levels(self) -> tuple[str, ...]:
        return tuple(k.label for k in self.configs.pool("nvl72").topology_keys)


@st.composite
def worlds(draw: st.DrawFn) -> World:
    racks = draw(st.integers(1, 2))
    trays = draw(st.integers(2, 6))
    cluster = parse_cluster(
        gb200_cluster_yaml(zones=1, spines=draw(st.integers(1, 2)), racks=racks, trays=trays)
    )
    nodes = [
        dataclasses.replace(node, health=HEALTHS[draw(st.sampled_from(sorted(HEALTHS)))])
        if draw(st.booleans())
        else node
        for node in cluster.nodes
    ]
    total = 4 * len(nodes)
    guarantee = draw(st.one_of(st.just(-1), st.integers(0, total)))
    maximum = draw(st.one_of(st.just(-1), st.integers(max(guarantee, 0), total + 8)))
    configs = EXAMPLES.with_changes(
        {
            ConfigType.POOL: {
                "nvl72": {
                    **EXAMPLES[ConfigType.POOL]["nvl72"],
                    "resources": {"gpu": {"guarantee": guarantee, "maximum": maximum, "weight": 1}},
                }
            }
        }
    )
    pods: list[BoundPod] = []
    for index, node in enumerate(nodes):
        held = draw(st.integers(0, 4))
        if held:
            pool = draw(st.sampled_from(POOLS))
            priority = draw(st.sampled_from(["normal", "low"]))
            pods.append(_pod(f"p{index}", node.name, held, pool, priority))
    return World(configs, ClusterCapacity(EMBEDDED, tuple(nodes), tuple(pods), POOLS))


def _pod(name: str, node: str, gpus: int, pool: str, priority: str) -> BoundPod:
    labels = {
        POOL: pool,
        QUEUE: queue_name(NAMESPACE, pool),
        PRIORITY: priority,
        GROUP_UUID: f"g-{name}",
        WORKFLOW_ID: f"w-{name}",
    }
    body = {
        "spec": {
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]
        }
    }
    return BoundPod(name, NAMESPACE, node, labels, body)


def placed(
    world: World, pool: str, priority: str, count: int, gpus: int, clique: str | None
) -> bool:
    """Whether the scheduler places, at once, a gang of ``count`` pods of ``gpus`` GPUs of
    ``pool``'s queue (in ``clique`` when given, requiring one gpu-clique)."""
    config = world.configs.pool(pool)
    cache = scheduler_state(world.configs, world.cluster)
    snapshot = cache.snapshot(world.levels, fabric_rule(config))
    selector = {"nvidia.com/gpu.product": "NVIDIA-GB200"}
    if clique is not None:
        selector[CLIQUE] = clique
    pod = {
        "metadata": {"name": "probe"},
        "spec": {
            "nodeSelector": selector,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
    }
    spec: dict[str, Any] = {"minMember": count, "queue": queue_name(NAMESPACE, pool)}
    if clique is not None:
        spec["topologyConstraint"] = {"topology": "t", "requiredTopologyLevel": CLIQUE}
    pods = [{**pod, "metadata": {"name": f"probe-{i}"}} for i in range(count)]
    root = read_pod_group({"spec": spec}, pods)
    found = place_pod_set(
        snapshot, root, queue_name(NAMESPACE, pool), cache.usage, preemptible=priority == "LOW"
    )
    return isinstance(found, Placement)


def most_placed(world: World, pool: str, priority: str, gpus: int, clique: str | None) -> int:
    """The largest gang the scheduler places at once (a gang of 0 is no gang)."""
    count = 0
    while placed(world, pool, priority, count + 1, gpus, clique):
        count += 1
    return count


def _capacity(world: World, pool: str, priority: str, gpus: int | None = None) -> PoolCapacity:
    return pool_capacity(world.configs, world.cluster, pool, priority=priority, task_gpus=gpus)


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(worlds(), st.sampled_from(["HIGH", "NORMAL", "LOW"]), st.sampled_from([1, 2, 4, None]))
def test_every_domains_fits_now_is_what_the_scheduler_places(
    world: World, priority: str, gpus: int | None
) -> None:
    for pool in POOLS:
        capacity = _capacity(world, pool, priority, gpus)
        for domain in capacity.domains:
            assert domain.fits == most_placed(
                world, pool, priority, domain.task_gpus, domain.domain
            ), (
                pool,
                domain,
            )


@SETTINGS
@given(worlds())
def test_a_clique_is_whole_free_only_if_a_gang_of_every_tray_is_placed_there(world: World) -> None:
    for pool in POOLS:
        for priority in ("NORMAL", "LOW"):
            for domain in _capacity(world, pool, priority).domains:
                whole = placed(world, pool, priority, domain.trays, 4, domain.domain)
                assert domain.whole_free == whole, (pool, priority, domain)


@SETTINGS
@given(worlds())
def test_the_views_say_what_the_model_says(world: World) -> None:
    """The overview's free GPUs (single-GPU tasks anywhere in the pool), the topology page's
    blocks and ``pool shapes`` read the model: each figure is the scheduler's."""
    overview = pool_capacities(world.configs, [world.cluster], list(POOLS), "NORMAL")
    for pool in POOLS:
        assert overview[pool].free_gpus == most_placed(world, pool, "NORMAL", 1, None)
        shapes = pool_shapes(world.configs, [world.cluster], _NoForecasts(), pool, NOW)
        levels = tuple(Level(k.key, k.label) for k in world.configs.pool(pool).topology_keys)
        drawn = pool_picture(world.configs, world.cluster, pool, levels, None)
        blocks = {block.value: block for panel in drawn.panels for block in panel.blocks}
        for domain in shapes["domains"]:
            scheduler = most_placed(world, pool, "NORMAL", 4, domain["domain"])
            assert domain["largest_gang"] == scheduler
            assert blocks[domain["domain"]].largest_gang == scheduler
            whole = placed(world, pool, "NORMAL", domain["trays"], 4, domain["domain"])
            assert (domain["whole_free_at"] is not None and domain["forecast_at"] is None) == whole


@SETTINGS
@given(worlds(), st.sampled_from(["HIGH", "NORMAL", "LOW"]), st.integers(1, 40))
def test_only_low_work_is_shown_to_borrow(world: World, priority: str, gpus: int) -> None:
    capacity = _capacity(world, "nvl72", "LOW")
    entries = queue_entries(
        [_waiting(priority)],
        {},
        lambda _: True,
        NOW,
        shapes={"group": RequestedShape(1, gpus, gpus, "")},
        quotas={"nvl72": capacity.quota},
    )
    (entry,) = entries
    quota = capacity.quota
    if priority != "LOW" or quota.guarantee is None:
        assert entry["borrows"] is None
    else:
        assert entry["borrows"] == min(gpus, max(quota.used + gpus - quota.guarantee, 0))


class _NoForecasts:
    def whole_free(self, label: str) -> Mapping[str, Any]:
        del label
        return {}


def _waiting(priority: str) -> Any:
    group = StoredGroup("g", "group", "SCHEDULING", [], [], [], [])
    return StoredWorkflow(
        "w-1",
        "w",
        "u",
        "nvl72",
        "default",
        NAMESPACE,
        "PENDING",
        priority,
        "bob",
        NOW,
        1.0,
        1.0,
        "",
        None,
        [group],
    )
