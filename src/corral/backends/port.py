"""The Backend port: what the lifecycle controller asks of a cluster, whether it is the embedded
one (objects in the database, corral's scheduler, local tasks) or a real Kubernetes cluster."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

import yaml

from corral.backends.execution import TaskExecutor
from corral.domain.platform.nodes import Node
from corral.scheduler.resources import Demand, pod_demand


@dataclass(frozen=True)
class Rule:
    """One RBAC ``PolicyRule``: ``verbs`` on ``resources`` of ``api_groups``."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]

    def as_dict(self) -> dict[str, list[str]]:
        return {
            "apiGroups": list(self.api_groups),
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }


def extra_rbac_rules_yaml(rules: Iterable[Rule]) -> str:
    """``rules`` as the ``extraRBACRules`` list an admin pastes into the chart values."""
    return yaml.safe_dump(
        [rule.as_dict() for rule in rules], default_flow_style=None, sort_keys=False
    )


@dataclass(frozen=True)
class BoundPod:
    """A pod that holds resources on a node (bound, not finished), of any cluster."""

    name: str
    namespace: str
    node: str
    labels: Mapping[str, str]
    body: Mapping[str, Any]

    @property
    def spec(self) -> Mapping[str, Any]:
        spec = self.body.get("spec")
        return spec if isinstance(spec, Mapping) else {}

    @cached_property
    def demand(self) -> Demand:
        """What the pod requests (computed once: a pod's spec does not change)."""
        return pod_demand(self.spec)


@dataclass(frozen=True)
class LiveCluster:
    """What a connected cluster reports of itself: its nodes, the pods holding resources on
    them (of every namespace), and the namespace corral's workflows run in."""

    nodes: tuple[Node, ...]
    bound_pods: tuple[BoundPod, ...]
    namespace: str


class BackendError(Exception):
    """The cluster refused or did not answer. ``transient``: the same request may succeed
    later (retry); otherwise it fails the same way again."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.message = message
        self.transient = transient


@dataclass(frozen=True)
class GroupObjects:
    """What cleanup deletes: every object of a finished task group, found by the kinds recorded
    at submission and the group's labels (so a template changed meanwhile changes nothing)."""

    uuid: str
    workflow_uuid: str
    backend: str
    namespace: str
    #: ``[apiVersion, kind]`` of every object the group was given, in creation order.
    kinds: list[list[str]]


def deletion_order(kinds: Sequence[Sequence[str]]) -> list[tuple[str, str]]:
    """Pods first (nothing keeps running on a deleted ComputeDomain), then the other kinds in
    reverse creation order."""
    ordered = [(str(api), str(kind)) for api, kind in reversed(kinds)]
    return sorted(ordered, key=lambda pair: pair != ("v1", "Pod"))


class ClusterBackend(Protocol):
    name: str
    #: True: the cluster's own scheduler (KAI) places pods; False: corral's scheduling pass.
    schedules_itself: bool
    #: True: each task's pod is given its own token (``apply_all``'s ``task_tokens``).
    takes_task_tokens: bool
    #: True: the cluster's objects live in corral's database (the embedded cluster), and
    #: ``apply_all``, ``delete_groups``, ``bind`` and ``unbind`` of a backend given the tick's
    #: :class:`~corral.backends.cluster_writes.ClusterWrites` are recorded there and written in
    #: the transaction that records their result. False: they reach the cluster at once.
    writes_in_transaction: bool

    def apply(self, manifest: Mapping[str, Any], namespace: str) -> None:
        """Create the object unless it exists; returns once the cluster accepted it."""

    def apply_all(
        self,
        manifests: Sequence[Mapping[str, Any]],
        namespace: str,
        task_tokens: Mapping[str, str] | None = None,
    ) -> None:
        """:meth:`apply` each object, in order (an error stops at that object). ``task_tokens``
        (task uuid -> the task's own token) go to the pods where the backend can deliver them
        without storing them (docs/checkpoints.md#a-tasks-own-token)."""

    def delete_collection(
        self, api_version: str, kind: str, namespace: str, labels: Mapping[str, str]
    ) -> int:
        """Delete the objects of one kind with ``labels``; how many there were."""

    def delete_groups(self, groups: Sequence[GroupObjects]) -> list[str]:
        """Delete every object of ``groups``; the uuids of the groups now gone (a group whose
        deletion failed is logged and left for the next try)."""

    def bind(self, namespace: str, nodes: Mapping[str, str]) -> None:
        """Bind pods (by name) to nodes: corral's scheduling pass placed them. A backend that
        ``schedules_itself`` refuses (non-transient :class:`BackendError`)."""

    def unbind(self, group_uuids: Sequence[str]) -> None:
        """Unbind every pod of the groups (evicted: their tasks stop after their notice). A
        backend that ``schedules_itself`` refuses, as for :meth:`bind`."""

    def executor(self) -> TaskExecutor: ...

    def missing_rules(self, kinds: Sequence[Sequence[str]], namespace: str) -> list[Rule]:
        """RBAC rules corral lacks to manage ``kinds`` in ``namespace`` (none: all granted)."""

    def missing_priority_classes(self, names: Sequence[str]) -> list[str]:
        """The PriorityClasses of ``names`` the cluster does not have (none: all there)."""

    def placement(
        self, namespace: str, pod_names: Sequence[str], pod_group: str | None
    ) -> dict[str, str] | str | None:
        """For a backend that ``schedules_itself``: pod -> node once every pod of the group is
        bound; otherwise the scheduler's reason for waiting, or None while it has said nothing."""

    def sync_scheduler_objects(self, desired: Sequence[Mapping[str, Any]]) -> bool:
        """Make the cluster's scheduler objects (KAI Queues, Topologies) equal ``desired``;
        True if it talked to the cluster."""

    def live_cluster(self, wait_seconds: float) -> LiveCluster | None:
        """The cluster's own nodes and bound pods, waiting up to ``wait_seconds`` for them to be
        listed; None for a backend whose nodes are the described cluster's."""
