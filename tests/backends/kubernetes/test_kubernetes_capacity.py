"""Capacity on a Kubernetes backend: ``resource list``/``info``, ``pool list`` and the
submission's node checks read the backend's Nodes and bound Pods from its watches, and only for
the pools of that backend.

In the kube world the ``default`` backend (pools default, heterogeneous_pool,
shared_simulation_training_pool, nvl72) is the fake API server holding a copy of every node of
the example cluster; every other backend is the embedded cluster (the cluster description).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from corral.domain.platform.nodes import GPU_RESOURCE, Node
from tests.backends.kubernetes.fake_kai import node_manifest
from tests.backends.kubernetes.kube_world import KubeWorld, wait_until

EXTRA = "gb200-extra"
GB200_NODES = 90  # 5 racks x 18 trays, 4 GPUs each
SIMPLE = """\
workflow:
  name: simple
  resources:
    default: {{cpu: 1, gpu: {gpu}{platform}}}
  tasks:
  - name: main
    image: busybox
    command: [sh, -c, "true"]
"""


def gb200_trays(w: KubeWorld) -> list[Node]:
    return [node for node in w.runtime.cluster.nodes if node.name.startswith("gb200-")]


def put_node(w: KubeWorld, node: Node) -> None:
    w.fake.put_object(node_manifest(node))
    wait_until(lambda: node in w.backend.nodes(), timeout_s=5.0)


def add_extra_tray(w: KubeWorld, gpus: int = 8) -> Node:
    """A GB200 tray only the Kubernetes cluster has."""
    tray = gb200_trays(w)[0]
    extra = replace(tray, name=EXTRA, allocatable={**tray.allocatable, GPU_RESOURCE: str(gpus)})
    put_node(w, extra)
    return extra


def delete_node(w: KubeWorld, name: str) -> None:
    store = w.fake.store
    store.delete(store.type_of("v1", "Node"), None, name)
    wait_until(lambda: name not in {n.name for n in w.backend.nodes()}, timeout_s=5.0)


def resources(w: KubeWorld, **params: Any) -> dict[str, Any]:
    status, body = w.api.call("GET", "/api/resources", params=params)
    assert status == 200, body
    return body  # type: ignore[no-any-return]


#: corral's own fields of a listed node (OSMO's ResourcesEntry stands beside them).
OWN_FIELDS = ("node", "type", "pools", "capacity", "used", "free")


def entries(w: KubeWorld, name: str, **params: Any) -> list[dict[str, Any]]:
    return [
        {field: entry[field] for field in OWN_FIELDS}
        for entry in resources(w, **params)["resources"]
        if entry["node"] == name
    ]


def usage(w: KubeWorld, pool: str) -> dict[str, str]:
    status, body = w.api.call("GET", "/api/pool_quota", params={"pools": [pool]})
    assert status == 200, body
    (node_set,) = body["node_sets"]
    (found,) = node_set["pools"]
    return found["resource_usage"]  # type: ignore[no-any-return]


def submit(w: KubeWorld, pool: str, gpu: int, platform: str = "") -> tuple[int, Any]:
    text = SIMPLE.format(gpu=gpu, platform=f", platform: {platform}" if platform else "")
    body = {"file": text, "source": "wf.yaml"}
    return w.api.call(
        "POST", f"/api/pool/{pool}/workflow", json=body, params={"validation_only": True}
    )


def test_a_node_added_to_the_cluster_is_listed_and_one_deleted_is_not(
    kube_world: KubeWorld,
) -> None:
    w = kube_world
    add_extra_tray(w)

    assert entries(w, EXTRA, pools=["nvl72"]) == [
        {
            "node": EXTRA,
            "type": "SHARED",  # my-pool's gb200 platform takes the trays too
            "pools": [{"pool": "nvl72", "platform": "gb200"}],
            "capacity": {"storage": 3072, "cpu": 144, "memory": 850, "gpu": 8},
            "used": {"storage": 0, "cpu": 0, "memory": 0, "gpu": 0},
            "free": {"storage": 3072, "cpu": 144, "memory": 850, "gpu": 8},
        }
    ]
    status, answer = w.api.call("GET", f"/api/resources/{EXTRA}")
    assert status == 200, answer
    (info,) = answer["resources"]
    assert info["allocatable"][GPU_RESOURCE] == "8"
    assert info["type"] == "SHARED"
    assert [(p["pool"], p["platform"]) for p in info["pools"]] == [
        ("my-pool", "gb200"),
        ("nvl72", "gb200"),
    ]
    assert usage(w, "nvl72")["total_capacity"] == str(GB200_NODES * 4 + 8)

    delete_node(w, EXTRA)

    assert entries(w, EXTRA, all=True) == []
    status, body = w.api.call("GET", f"/api/resources/{EXTRA}")
    assert status == 404, body
    assert usage(w, "nvl72")["total_capacity"] == str(GB200_NODES * 4)


def test_pods_of_anyone_bound_and_running_count_until_they_finish(kube_world: KubeWorld) -> None:
    w = kube_world
    tray = gb200_trays(w)[0].name
    w.fake.create_namespace("team-b")
    w.fake.put_object(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "someone-else", "namespace": "team-b"},
            "spec": {
                "nodeName": tray,
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {
                            "requests": {GPU_RESOURCE: "4", "cpu": "2"},
                            "limits": {GPU_RESOURCE: "4"},
                        },
                    }
                ],
            },
            "status": {"phase": "Running"},
        }
    )
    w.settle()

    (entry,) = entries(w, tray, pools=["nvl72"])
    assert entry["used"] == {"storage": 0, "cpu": 2, "memory": 0, "gpu": 4}
    assert entry["free"]["gpu"] == 0
    capacity = GB200_NODES * 4
    assert usage(w, "nvl72") == {
        "quota_used": "0",  # not a task of the pool: no osmo.pool label
        "quota_free": "64",
        "quota_limit": "64",
        "total_usage": "0",
        "total_capacity": str(capacity),
        "total_free": str(capacity - 4),
        "quota_maximum": "72",
        "borrowed": "0",
        "preempted": "0",
        "healthy_capacity": str(capacity),
    }
    # The embedded cluster's node of the same name is another node: nothing runs on it.
    (embedded,) = entries(w, tray, pools=["robotics-training"])
    assert embedded["used"]["gpu"] == 0

    w.fake.update_status("v1", "Pod", "team-b", "someone-else", {"phase": "Succeeded"})
    w.settle()

    (entry,) = entries(w, tray, pools=["nvl72"])
    assert entry["used"] == {"storage": 0, "cpu": 0, "memory": 0, "gpu": 0}
    assert usage(w, "nvl72")["total_free"] == str(capacity)


def test_pools_of_an_embedded_backend_keep_the_cluster_description(kube_world: KubeWorld) -> None:
    w = kube_world
    add_extra_tray(w)
    tray = gb200_trays(w)[0].name

    listed = resources(w, pools=["robotics-training"])["resources"]
    assert EXTRA not in {entry["node"] for entry in listed}
    assert len([e for e in listed if e["node"].startswith("gb200-")]) == GB200_NODES
    # Each cluster's tray serves only the pools of its own backend: the embedded one only
    # robotics-training; the Kubernetes one nvl72 and my-pool (SHARED), listed for nvl72 only.
    (embedded,) = [e for e in listed if e["node"] == tray]
    assert (embedded["type"], embedded["pools"]) == (
        "RESERVED",
        [{"pool": "robotics-training", "platform": "gb200-platform"}],
    )
    (kubernetes,) = entries(w, tray, pools=["nvl72"])
    assert (kubernetes["type"], kubernetes["pools"]) == (
        "SHARED",
        [{"pool": "nvl72", "platform": "gb200"}],
    )
    # A name of both clusters: both are listed; `resource info` shows the one serving a pool.
    both_pools = [{"pool": "my-pool", "platform": "gb200"}, *kubernetes["pools"]]
    assert [e["pools"] for e in entries(w, tray)] == [embedded["pools"], both_pools]
    status, answer = w.api.call("GET", f"/api/resources/{tray}")
    assert status == 200, answer
    # OSMO's shape lists the node of each cluster; the one serving a pool of yours first
    assert [[p["pool"] for p in info["pools"]] for info in answer["resources"]] == [
        ["robotics-training"],
        ["my-pool", "nvl72"],
    ]
    # Node sets no longer join nvl72 (Kubernetes) and robotics-training (embedded) over the
    # trays of the same names: each pool has its own cluster's capacity.
    status, body = w.api.call(
        "GET", "/api/pool_quota", params={"pools": ["nvl72", "robotics-training"]}
    )
    assert status == 200, body
    assert [[p["name"] for p in s["pools"]] for s in body["node_sets"]] == [
        ["nvl72"],
        ["robotics-training"],
    ]
    assert body["node_sets"][0]["pools"][0]["resource_usage"]["total_capacity"] == str(
        GB200_NODES * 4 + 8
    )
    assert body["node_sets"][1]["pools"][0]["resource_usage"]["total_capacity"] == str(
        GB200_NODES * 4 + 8 * 8
    )


def test_submissions_are_checked_against_the_backends_nodes(kube_world: KubeWorld) -> None:
    w = kube_world
    status, body = submit(w, "nvl72", gpu=8)
    assert status == 400, body
    assert body["message"].startswith("Resource validation failed for task: main")
    assert "GPU value 8 too high for GPU" in body["message"]

    add_extra_tray(w, gpus=8)  # only the Kubernetes cluster has a tray with 8 GPUs
    status, body = submit(w, "nvl72", gpu=8)
    assert status == 200, body
    # robotics-training (embedded) also has a GB200 platform: its trays still have 4 GPUs.
    status, body = submit(w, "robotics-training", gpu=8, platform="gb200-platform")
    assert status == 400, body
    assert "GPU value 8 too high" in body["message"]

    delete_node(w, EXTRA)
    for tray in gb200_trays(w):
        w.fake.put_object(
            node_manifest(replace(tray, allocatable={**tray.allocatable, GPU_RESOURCE: "2"}))
        )
    wait_until(
        lambda: (
            {n.allocatable.get(GPU_RESOURCE) for n in w.backend.nodes() if "gb200" in n.name}
            == {"2"}
        ),
        timeout_s=5.0,
    )

    status, body = submit(w, "nvl72", gpu=4)
    assert status == 400, body
    assert body["message"].startswith("Resource validation failed for task: main")
    assert "GPU value 4 too high for GPU" in body["message"]
    status, body = submit(w, "nvl72", gpu=2)
    assert status == 200, body


def test_a_backend_that_cannot_be_connected_has_no_nodes(
    kube_world: KubeWorld, tmp_path: Path
) -> None:
    w = kube_world
    missing = {"kubeconfig": str(tmp_path / "missing"), "api_timeout": "2s"}
    status, body = w.api.call(
        "POST", "/api/configs/backend/default", json={"configs_dict": {"kubernetes": missing}}
    )
    assert status == 200, body

    assert resources(w, pools=["nvl72"])["resources"] == []
    assert usage(w, "nvl72")["total_capacity"] == "0"
    assert len(resources(w, pools=["robotics-training"])["resources"]) == 4 + 4 + GB200_NODES
    status, body = submit(w, "nvl72", gpu=4)
    assert (status, body["message"]) == (
        400,
        "There are no resources in platform gb200 and pool nvl72!",
    )
