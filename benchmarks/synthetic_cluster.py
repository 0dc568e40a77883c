"""The synthetic cluster the scheduler benchmarks share: 8-GPU nodes in 4 topology levels
(zone > spine > rack > gpu-clique, 16 nodes per clique), and pods as corral's submission
pipeline renders them."""

from __future__ import annotations

from typing import Any

from corral.domain.platform.nodes import Node, Taint

ZONE = "topology.kubernetes.io/zone"
SPINE = "topology.kubernetes.io/spine"
RACK = "topology.kubernetes.io/rack"
CLIQUE = "nvidia.com/gpu-clique"
LEVELS = (ZONE, SPINE, RACK, CLIQUE)
NODES_PER_CLIQUE = 16
CLIQUES_PER_RACK = 2
RACKS_PER_SPINE = 4
SPINES_PER_ZONE = 4
GPUS_PER_NODE = 8
PRODUCT = "NVIDIA-H100-80GB-HBM3"
TOPOLOGY = "osmo-pool-default-bench-topology"
POD_GROUP_VERSION = "scheduling.run.ai/v2alpha2"


def make_nodes(count: int) -> list[Node]:
    nodes = []
    for i in range(count):
        clique = i // NODES_PER_CLIQUE
        rack = clique // CLIQUES_PER_RACK
        spine = rack // RACKS_PER_SPINE
        zone = spine // SPINES_PER_ZONE
        labels = {
            ZONE: f"zone-{zone}",
            SPINE: f"spine-{spine}",
            RACK: f"rack-{rack}",
            CLIQUE: f"clique-{clique}",
            "nvidia.com/gpu.product": PRODUCT,
        }
        nodes.append(
            Node(
                name=f"node-{i:05d}",
                labels=labels,
                taints=(Taint("nvidia.com/gpu", "NoSchedule", "present"),),
                allocatable={
                    "cpu": "224",
                    "memory": "1950Gi",
                    "ephemeral-storage": "28Ti",
                    "nvidia.com/gpu": str(GPUS_PER_NODE),
                },
            )
        )
    return nodes


def make_pod(name: str, gpu: int, subgroup: str | None) -> dict[str, Any]:
    requests = {"cpu": 2 * gpu or 1, "memory": f"{16 * max(gpu, 1)}Gi", "nvidia.com/gpu": gpu}
    requests["ephemeral-storage"] = "10Gi"
    labels = {"kai.scheduler/subgroup-name": subgroup} if subgroup else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "containers": [
                {"name": "main", "resources": {"requests": requests, "limits": dict(requests)}}
            ],
            "nodeSelector": {"nvidia.com/gpu.product": PRODUCT},
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
        },
    }
