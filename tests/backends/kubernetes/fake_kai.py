"""Test-only stand-ins for what runs inside a real cluster: KAI (places PodGroups, reading the
Topology object their constraint names from the API server) and the kubelet (runs bound pods
and reports how their containers ended). They write only what those components write: a pod's
``spec.nodeName`` and ``status``, a PodGroup's ``status``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from corral.backends.kubernetes.backend import node_from_object
from corral.backends.kubernetes.node_health import node_health
from corral.domain.platform.nodes import Node
from corral.domain.topology.podgroup import POD_GROUP_ANNOTATION
from corral.scheduler import Binding, ClusterSnapshot, Placement
from corral.scheduler.gang import place_group
from corral.scheduler.resources import pod_demand
from tests.backends.kubernetes.fake_apiserver import FakeKubeServer

POD_GROUP = ("scheduling.run.ai/v2alpha2", "PodGroup")
TOPOLOGY = ("kai.scheduler/v1alpha1", "Topology")


def node_manifest(node: Node) -> dict[str, Any]:
    """A Kubernetes Node for one node of a corral cluster description."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": dict(node.labels)},
        "spec": {
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints]
        }
        if node.taints
        else {},
        "status": {"allocatable": dict(node.allocatable), "capacity": dict(node.allocatable)},
    }


class FakeKai:
    """One scheduling cycle per :meth:`schedule`; placements with corral's own gang scheduler
    over the API server's Nodes and Topologies, as KAI would decide them."""

    def __init__(self, server: FakeKubeServer) -> None:
        self.server = server
        #: PodGroup name -> the reason written on its last failed cycle.
        self.reasons: dict[str, str] = {}

    def schedule(self) -> int:
        """Place every PodGroup whose pods are all unbound; how many were placed."""
        # KAI leaves cordoned and NotReady nodes alone, as kube-scheduler does.
        nodes = [
            node_from_object(obj, node_health(obj, {}, {}))
            for obj in self.server.objects("v1", "Node")
        ]
        pods = [p for p in self.server.objects("v1", "Pod") if not _deleting(p)]
        bound = [
            Binding(p["metadata"]["name"], p["spec"]["nodeName"], pod_demand(p["spec"]))
            for p in pods
            if p["spec"].get("nodeName") and not _finished(p)
        ]
        placed = 0
        for group in self.server.objects(*POD_GROUP):
            members = [p for p in pods if _member_of(p, group)]
            if not members or any(p["spec"].get("nodeName") for p in members):
                continue
            result = self._place(nodes, bound, group, members)
            if isinstance(result, Placement):
                for binding in result.bindings:
                    self._bind(members, binding.pod, binding.node)
                bound.extend(result.bindings)
                placed += 1
        return placed

    def _place(
        self,
        nodes: list[Node],
        bound: list[Binding],
        group: Mapping[str, Any],
        members: list[dict[str, Any]],
    ) -> Placement | None:
        topology = _topology_name(group["spec"])
        levels: tuple[str, ...] = ()
        if topology:
            found = self.server.get_object(*TOPOLOGY, None, topology)
            if found is None:
                self._unschedulable(group, f"Requested topology {topology} does not exist")
                return None
            levels = tuple(level["nodeLabel"] for level in found["spec"]["levels"])
        snapshot = ClusterSnapshot.from_nodes(nodes, levels)
        snapshot.bind(bound)
        result = place_group(snapshot, group, members, None)
        if isinstance(result, Placement):
            return result
        self._unschedulable(group, result.reason)
        return None

    def _unschedulable(self, group: Mapping[str, Any], reason: str) -> None:
        name = group["metadata"]["name"]
        if self.reasons.get(name) == reason:
            return
        self.reasons[name] = reason
        condition = {
            "type": "UnschedulableOnNodePool",
            "nodePool": "default",
            "lastTransitionTime": "2026-11-21T12:00:00Z",
            "reasons": [{"reason": "Unschedulable", "message": reason}],
        }
        self.server.update_status(
            *POD_GROUP,
            group["metadata"]["namespace"],
            name,
            {"schedulingConditions": [condition]},
        )

    def _bind(self, members: list[dict[str, Any]], pod_name: str, node: str) -> None:
        pod = next(p for p in members if p["metadata"]["name"] == pod_name)
        pod["spec"]["nodeName"] = node
        pod.pop("status", None)
        stored = self.server.put_object(pod)
        running = {
            "phase": "Running",
            "containerStatuses": [
                {"name": c["name"], "ready": True, "state": {"running": {}}}
                for c in stored["spec"]["containers"]
            ],
        }
        self.server.update_status("v1", "Pod", stored["metadata"]["namespace"], pod_name, running)


class FakeKubelet:
    """Ends running pods (those ``only`` picks): the task container exits with ``code_of(pod)``."""

    def __init__(self, server: FakeKubeServer) -> None:
        self.server = server

    def finish(
        self,
        code_of: Callable[[Mapping[str, Any]], int] = lambda _pod: 0,
        only: Callable[[Mapping[str, Any]], bool] = lambda _pod: True,
    ) -> int:
        ended = 0
        for pod in self.server.objects("v1", "Pod"):
            status = pod.get("status") or {}
            if status.get("phase") != "Running" or not only(pod):
                continue
            code = code_of(pod)
            containers = [
                {
                    "name": c["name"],
                    "ready": False,
                    "state": {
                        "terminated": {
                            "exitCode": code,
                            "reason": "Completed" if code == 0 else "Error",
                        }
                    },
                }
                for c in pod["spec"]["containers"]
            ]
            phase = "Succeeded" if code == 0 else "Failed"
            self.server.update_status(
                "v1",
                "Pod",
                pod["metadata"]["namespace"],
                pod["metadata"]["name"],
                {"phase": phase, "containerStatuses": containers},
            )
            ended += 1
        return ended


def _member_of(pod: Mapping[str, Any], group: Mapping[str, Any]) -> bool:
    annotations = pod["metadata"].get("annotations") or {}
    return bool(
        annotations.get(POD_GROUP_ANNOTATION) == group["metadata"]["name"]
        and pod["metadata"].get("namespace") == group["metadata"].get("namespace")
    )


def _finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _deleting(pod: Mapping[str, Any]) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def _topology_name(spec: Mapping[str, Any]) -> str:
    """The Topology the PodGroup's constraints name (on the group or on any subgroup)."""
    constraints = [spec.get("topologyConstraint") or {}]
    constraints += [sub.get("topologyConstraint") or {} for sub in spec.get("subGroups") or []]
    return next((str(c["topology"]) for c in constraints if c.get("topology")), "")
