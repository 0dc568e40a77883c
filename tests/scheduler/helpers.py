"""Small builders of nodes, pods and PodGroups for the scheduler tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.domain.labels import POOL as POOL_LABEL
from corral.domain.platform.nodes import Node, Taint
from corral.domain.topology.podgroup import API_VERSION, KIND
from corral.scheduler import Queue

ZONE = "topology.kubernetes.io/zone"
SPINE = "topology.kubernetes.io/spine"
RACK = "topology.kubernetes.io/rack"
CLIQUE = "nvidia.com/gpu-clique"
LEVELS = (ZONE, SPINE, RACK, CLIQUE)
TOPOLOGY = "test-topology"
GPU_TAINT = Taint("nvidia.com/gpu", "NoSchedule", "present")
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def node(
    name: str,
    *,
    gpu: int = 8,
    cpu: str = "64",
    memory: str = "512Gi",
    labels: dict[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    extra: dict[str, str] | None = None,
) -> Node:
    return Node(
        name=name,
        labels=labels or {},
        taints=taints,
        allocatable={
            "cpu": cpu,
            "memory": memory,
            "ephemeral-storage": "1Ti",
            "nvidia.com/gpu": str(gpu),
            **(extra or {}),
        },
    )


def topo_node(name: str, zone: str, spine: str, rack: str, clique: str, gpu: int = 8) -> Node:
    labels = {ZONE: zone, SPINE: spine, RACK: rack, CLIQUE: clique}
    return node(name, gpu=gpu, labels=labels)


def pod(
    name: str,
    *,
    gpu: int = 1,
    cpu: str | int = "1",
    memory: str = "1Gi",
    subgroup: str | None = None,
    selector: dict[str, str] | None = None,
    tolerations: list[dict[str, str]] | None = None,
    use_limits: bool = False,
    affinity: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    amounts: dict[str, Any] = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": gpu, **(extra or {})}
    resources = {"limits": amounts} if use_limits else {"requests": amounts}
    labels = {"kai.scheduler/subgroup-name": subgroup} if subgroup else {}
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": resources}]}
    if selector:
        spec["nodeSelector"] = selector
    if tolerations:
        spec["tolerations"] = tolerations
    if affinity:
        spec["affinity"] = {"nodeAffinity": affinity}
    return {"kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}


def constraint(required: str | None = None, preferred: str | None = None) -> dict[str, str]:
    value = {"topology": TOPOLOGY}
    if required:
        value["requiredTopologyLevel"] = required
    if preferred:
        value["preferredTopologyLevel"] = preferred
    return value


def pod_group(
    min_member: int | None = None,
    topology: dict[str, str] | None = None,
    subgroups: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"queue": "q"}
    if min_member is not None:
        spec["minMember"] = min_member
    if topology:
        spec["topologyConstraint"] = topology
    if subgroups:
        spec["subGroups"] = subgroups
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "pg"}, "spec": spec}


def queue_of(manifest: Mapping[str, Any]) -> Queue:
    """The scheduler's view of a synced Queue manifest (-1 means unlimited), to compare the
    embedded scheduler's queues with what the Kubernetes backend syncs."""
    gpu = manifest["spec"]["resources"]["gpu"]
    quota, limit = int(gpu["quota"]), int(gpu["limit"])
    return Queue(
        manifest["metadata"]["name"],
        gpu_guarantee=None if quota < 0 else quota,
        gpu_maximum=None if limit < 0 else limit,
        weight=int(gpu["overQuotaWeight"]),
        pool=manifest["metadata"]["labels"].get(POOL_LABEL, ""),
    )
