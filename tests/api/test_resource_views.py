"""``GET /api/pool_quota``, ``GET /api/resources`` and ``GET /api/resources/{node}`` on the
example configs and cluster, with running tasks made from real dry-run pod manifests."""

from __future__ import annotations

from typing import Any

from corral.backends.embedded.objects import ClusterObjectStore
from corral.domain.views.pool_quota import HEALTH_FIELDS, QUEUE_FIELDS, USAGE_FIELDS
from tests.conftest import REPO, Api

WORKFLOWS = REPO / "examples" / "workflows"
NVL72_NODES = [f"gb200-zone-a-s0-r0-g0-{i:02d}" for i in range(4)]
OTHER_RACK = [f"gb200-zone-a-s0-r1-g0-{i:02d}" for i in range(4)]


def run_on(api: Api, example: str, pool: str, nodes: list[str], priority: str = "NORMAL") -> None:
    """Dry-run ``example`` and make its pods run: apply them and bind them to ``nodes``."""
    text = (WORKFLOWS / example).read_text()
    body = {"file": text, "set_variables": [], "set_string_variables": [], "source": example}
    status, plan = api.call(
        "POST",
        f"/api/pool/{pool}/workflow",
        json=body,
        params={"dry_run": "true", "priority": priority},
    )
    assert status == 200, plan
    pods = [m for g in plan["groups"] for m in g["manifests"] if m["kind"] == "Pod"]
    assert len(pods) == len(nodes)
    runtime = api.runtime
    for pod in pods:
        runtime.objects.apply("default", pod, plan["namespace"])
    with runtime.engine.begin() as connection:
        names = {pod["metadata"]["name"]: node for pod, node in zip(pods, nodes, strict=True)}
        ClusterObjectStore.bind(connection, "default", plan["namespace"], names)


def usage(body: dict[str, Any], pool: str) -> dict[str, str]:
    for node_set in body["node_sets"]:
        for found in node_set["pools"]:
            if found["name"] == pool:
                return dict(found["resource_usage"])
    raise KeyError(pool)


def node_sets(body: dict[str, Any]) -> list[list[str]]:
    return [[p["name"] for p in s["pools"]] for s in body["node_sets"]]


def test_pool_quota_on_the_example_cluster(examples: Api) -> None:
    status, idle = examples.call("GET", "/api/pool_quota")
    assert status == 200, idle
    assert node_sets(idle) == [
        [
            "default",
            "heterogeneous_pool",
            "robotics-inference",
            "robotics-simulation",
            "shared_simulation_training_pool",
            "team-development",
        ],
        ["my-pool", "nvl72", "robotics-training"],
        ["robotics-inference-jetson"],
    ]
    assert usage(idle, "nvl72") == {
        "quota_used": "0",
        "quota_free": "64",
        "quota_limit": "64",  # guarantee 64
        "total_usage": "0",
        # its own 90 GB200 trays x 4, listed with other pools or alone (issue 14; before, the
        # node set's 424 here and 360 with -p nvl72)
        "total_capacity": "360",
        "total_free": "360",
        "quota_maximum": "72",  # maximum 72
        "borrowed": "0",
        "preempted": "0",
        "healthy_capacity": "360",  # every tray takes new work
    }
    # -1: its own capacity, 90 trays x 4 + 8 DGX A100 / H100 x 8
    assert usage(idle, "robotics-training")["quota_limit"] == "424"
    sums = idle["resource_sum"]
    corral_fields = ("quota_maximum", "borrowed", "preempted", "healthy_capacity")
    assert {key: sums.pop(key) for key in corral_fields} == {
        "quota_maximum": str(int(sums["quota_limit"]) - 64 + 72),  # nvl72: 72, not 64
        "borrowed": "0",
        "preempted": "0",
        "healthy_capacity": "508",
    }
    assert sums == {
        "quota_used": "0",
        "quota_free": "1104",  # each pool's own limit, summed
        "quota_limit": "1104",
        "total_usage": "0",
        "total_capacity": "508",
        "total_free": "508",
    }
    first = idle["node_sets"][1]["pools"][0]
    assert list(first)[:3] == ["name", "description", "status"]
    assert first["platforms"]["gb200"]["host_network_allowed"] is False

    run_on(examples, "nvl72-single-rack.yaml", "nvl72", NVL72_NODES)  # 4 x 4 GPUs, NORMAL
    run_on(examples, "nvl72-single-rack.yaml", "nvl72", OTHER_RACK, priority="LOW")
    status, busy = examples.call("GET", "/api/pool_quota", params={"pools": ["nvl72"]})
    assert status == 200, busy
    assert node_sets(busy) == [["nvl72"]]
    assert usage(busy, "nvl72") == {
        "quota_used": "16",  # the LOW workflow does not count against the quota
        "quota_free": "48",
        "quota_limit": "64",
        "total_usage": "32",
        "total_capacity": "360",  # nvl72 alone: its 90 trays
        "total_free": "328",
        "quota_maximum": "72",
        "borrowed": "0",  # 32 in use, within the guarantee of 64
        "preempted": "0",
        "healthy_capacity": "360",
    }
    _, both = examples.call(
        "GET", "/api/pool_quota", params={"pools": ["robotics-training", "nvl72", "nope"]}
    )
    assert node_sets(both) == [["nvl72", "robotics-training"]]
    assert usage(both, "robotics-training")["total_usage"] == "0"
    assert usage(both, "robotics-training")["total_free"] == "392"  # the nvl72 pods take GPUs


def test_resources_listing_and_node_info(examples: Api) -> None:
    run_on(examples, "nvl72-single-rack.yaml", "nvl72", NVL72_NODES)
    status, body = examples.call("GET", "/api/resources", params={"pools": ["nvl72"]})
    assert status == 200, body
    assert len(body["resources"]) == 90
    busy = body["resources"][0]
    assert (busy["node"], busy["type"], busy["pools"]) == (
        NVL72_NODES[0],
        "SHARED",  # robotics-training's gb200-platform selects the trays too
        [{"pool": "nvl72", "platform": "gb200"}],
    )
    assert busy["capacity"] == {"storage": 3072, "cpu": 144, "memory": 850, "gpu": 4}
    assert busy["used"]["gpu"] == 4
    assert body["resource_sum"]["capacity"]["gpu"] == 360
    assert body["resource_sum"]["used"]["gpu"] == 16

    _, both = examples.call(
        "GET", "/api/resources", params={"pools": ["nvl72", "robotics-training"]}
    )
    tray = next(n for n in both["resources"] if n["node"] == NVL72_NODES[0])
    assert tray["pools"] == [
        {"pool": "robotics-training", "platform": "gb200-platform"},
        {"pool": "nvl72", "platform": "gb200"},
    ]
    assert both["resource_sum"]["capacity"]["gpu"] == 424  # each node once

    _, a100 = examples.call(
        "GET",
        "/api/resources",
        params={"pools": ["heterogeneous_pool"], "platforms": ["a100_platform"]},
    )
    assert [n["node"] for n in a100["resources"]] == ["a100-0", "a100-1", "a100-2"]
    _, every = examples.call("GET", "/api/resources", params={"all": "true"})
    _, mine = examples.call("GET", "/api/resources")
    assert len(every["resources"]) == len(mine["resources"]) == 127  # every node serves a pool

    status, answer = examples.call("GET", f"/api/resources/{NVL72_NODES[0]}")
    assert status == 200, answer
    (info,) = answer["resources"]  # OSMO's shape: the node of that name in each cluster
    assert info["used"]["gpu"] == 4 and info["free"]["gpu"] == 0
    assert [(p["pool"], p["platform"]) for p in info["pools"]] == [
        ("robotics-training", "gb200-platform"),
        ("my-pool", "gb200"),
        ("nvl72", "gb200"),
    ]
    assert info["allocatable"]["nvidia.com/gpu"] == "4"


def test_resource_errors(examples: Api) -> None:
    assert examples.call("GET", "/api/resources/nope") == (
        404,
        {
            "message": "Node nope does not exist! `corral resource list --all` lists the nodes.",
            "error_code": "NOT_FOUND",
        },
    )
    assert examples.call("GET", "/api/resources", params={"pools": ["nope"]}) == (
        404,
        {
            "message": "Pool nope does not exist! `corral pool list` shows the pools you may use.",
            "error_code": "NOT_FOUND",
        },
    )
    status, body = examples.call(
        "GET", "/api/resources", params={"pools": ["nvl72"], "platforms": ["h100"]}
    )
    assert (status, body["message"]) == (
        404,
        "Platform h100 does not exist in the pools listed! Their platforms: gb200",
    )


def test_a_user_sees_only_the_pools_it_may_use(examples: Api) -> None:
    token = examples.runtime.tokens.create(name="bob", username="bob", roles=["osmo-user"])
    bob = {"Authorization": f"Bearer {token}"}
    status, quota = examples.call("GET", "/api/pool_quota", headers=bob)
    assert (status, node_sets(quota)) == (200, [["default"]])
    assert usage(quota, "default")["total_capacity"] == "32"  # default alone: 4 L40S x 8, CPU nodes
    _, named = examples.call("GET", "/api/pool_quota", params={"pools": ["nvl72"]}, headers=bob)
    assert named == {
        "node_sets": [],
        "resource_sum": dict.fromkeys((*USAGE_FIELDS, *QUEUE_FIELDS, *HEALTH_FIELDS), "0"),
        "page": {"offset": 0, "limit": 50, "total": 0, "next_offset": None},
    }

    _, listed = examples.call("GET", "/api/resources", headers=bob)
    assert {p["pool"] for n in listed["resources"] for p in n["pools"]} == {"default"}
    assert examples.call("GET", "/api/resources", params={"pools": ["nvl72"]}, headers=bob) == (
        403,
        {
            "message": "bob may not see the resources of pool nvl72: denied: no policy of "
            "osmo-user, osmo-default allows workflow:Create on pool/nvl72.",
            "error_code": "FORBIDDEN",
        },
    )
    status, answer = examples.call("GET", "/api/resources/a100-0", headers=bob)
    (info,) = answer["resources"]
    assert (status, info["type"], info["pools"]) == (200, "SHARED", [])

    nobody = examples.runtime.tokens.create(name="dave", username="dave", roles=[])
    status, body = examples.call(
        "GET", "/api/resources", headers={"Authorization": f"Bearer {nobody}"}
    )
    assert (status, body["message"]) == (
        403,
        "dave may not resources:Read: denied: no policy of osmo-default allows resources:Read.",
    )
