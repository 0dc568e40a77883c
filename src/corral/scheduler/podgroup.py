"""Reading a stored KAI PodGroup and its Pods into the tree the scheduler places.

KAI's interpretation (docs/osmo-reference.md#kais-topology-and-gang-semantics): the PodGroup is the
root set and carries its own ``topologyConstraint``; a subgroup that is some subgroup's ``parent``
is a set of sets (its ``minMember`` is ignored); a subgroup without children is a leaf holding the
pods that name it in the ``kai.scheduler/subgroup-name`` label, of which ``max(minMember, 1)`` must
be placed together. Without subgroups the root is the one leaf, with ``spec.minMember``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.domain.labels import SUBGROUP as SUBGROUP_LABEL
from corral.domain.platform.node_affinity import NO_AFFINITY, NodeAffinity, read_node_affinity
from corral.domain.topology.podgroup import pod_group_of
from corral.domain.views.requested_shape import RequestedShape
from corral.errors import UserError
from corral.scheduler.resources import Demand, pod_demand

#: The name placements use for the PodGroup itself (subgroup names are never empty).
WHOLE_GROUP = ""


class GroupError(ValueError):
    """The PodGroup or its pods cannot be scheduled as written (a message for the user)."""


@dataclass(frozen=True, slots=True)
class Constraint:
    """Node labels of the required and preferred topology levels (either may be None)."""

    required: str | None = None
    preferred: str | None = None


@dataclass(frozen=True, slots=True)
class PodRequest:
    name: str
    demand: Demand
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]
    affinity: NodeAffinity = NO_AFFINITY


@dataclass(slots=True)
class PodSet:
    """The PodGroup or one of its subgroups: pods that are placed together."""

    name: str
    constraint: Constraint | None
    children: list[PodSet] = field(default_factory=list)
    #: Gang members: a leaf's first ``minMember`` pods. Set by :func:`read_pod_group`.
    members: list[PodRequest] = field(default_factory=list)
    #: A leaf's pods beyond ``minMember``: placed when they fit, never blocking the gang.
    extras: list[PodRequest] = field(default_factory=list)
    min_member: int = 1
    # Totals over the gang members of this set and every set below, for fit tests.
    total: Demand = field(default_factory=Demand)
    count: int = 0
    #: GPUs of every member when all members request the same number (> 0); else 0.
    uniform_gpu: int = 0

    def walk(self) -> Iterator[PodSet]:
        """This set and every set below it, parents first."""
        yield self
        for child in self.children:
            yield from child.walk()

    def all_members(self) -> Iterator[PodRequest]:
        for pod_set in self.walk():
            yield from pod_set.members

    def all_pods(self) -> Iterator[PodRequest]:
        """Every pod, members and extras, in the order placements are tried."""
        for pod_set in self.walk():
            yield from pod_set.members
            yield from pod_set.extras


def shape_of(root: PodSet, *context: Any) -> str:
    """A digest of everything placing ``root`` depends on but its pods' names (and of
    ``context``, such as the topology levels and the queue): on one snapshot, sets with equal
    shapes are placed alike, or fail alike. The scheduler does not order by pod names."""
    return hashlib.sha256(
        json.dumps([_describe(root), *context], sort_keys=True, default=str).encode()
    ).hexdigest()


def _describe(pod_set: PodSet) -> list[Any]:
    constraint = pod_set.constraint
    return [
        pod_set.name,
        None if constraint is None else [constraint.required, constraint.preferred],
        pod_set.min_member,
        [_describe(child) for child in pod_set.children],
        [_pod_shape(pod) for pod in pod_set.members],
        [_pod_shape(pod) for pod in pod_set.extras],
    ]


def _pod_shape(pod: PodRequest) -> list[Any]:
    demand = pod.demand
    amounts = (demand.gpu, demand.cpu, demand.memory, demand.storage, demand.pods, demand.extended)
    return [amounts, dict(pod.node_selector), list(pod.tolerations), pod.affinity]


def _constraint(value: Any, owner: str) -> Constraint | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise GroupError(f"the topologyConstraint of {owner} must be an object")
    if not value.get("topology"):  # KAI: no topology name, no constraint
        return None
    required = value.get("requiredTopologyLevel") or None
    preferred = value.get("preferredTopologyLevel") or None
    if required is None and preferred is None:
        return None
    return Constraint(required, preferred)


def _pod_request(pod: Mapping[str, Any]) -> PodRequest:
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    name = str(metadata.get("name", ""))
    try:
        demand = pod_demand(spec)
        affinity = read_node_affinity(spec)
    except (ValueError, UserError) as err:
        raise GroupError(f"pod {name}: {err}") from None
    selector = spec.get("nodeSelector") or {}
    tolerations = spec.get("tolerations") or []
    return PodRequest(
        name=name,
        demand=demand,
        node_selector={str(k): str(v) for k, v in selector.items()},
        tolerations=tuple(tolerations),
        affinity=affinity,
    )


def _subgroup_label(pod: Mapping[str, Any]) -> str | None:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    value = labels.get(SUBGROUP_LABEL)
    return None if value is None else str(value)


def read_pod_group(pod_group: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> PodSet:
    """The tree of sets to place; raises :class:`GroupError` for what KAI would not schedule."""
    spec = pod_group.get("spec") or {}
    root = PodSet(WHOLE_GROUP, _constraint(spec.get("topologyConstraint"), "the PodGroup"))
    subgroups = spec.get("subGroups") or []
    if not subgroups:
        requests = [_pod_request(pod) for pod in pods]
        _fill_leaf(root, requests, int(spec.get("minMember") or 1), "the PodGroup")
    else:
        _build_subgroups(root, subgroups, pods)
    _total(root)
    return root


def _build_subgroups(
    root: PodSet, subgroups: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]
) -> None:
    sets: dict[str, PodSet] = {}
    minimum: dict[str, int] = {}
    for entry in subgroups:
        name = str(entry.get("name", ""))
        if not name or name in sets:
            raise GroupError(f"subgroup name {name!r} is empty or used twice")
        owner = f"subgroup {name}"
        sets[name] = PodSet(name, _constraint(entry.get("topologyConstraint"), owner))
        minimum[name] = int(entry.get("minMember") or 1)
    for entry in subgroups:
        parent_name = entry.get("parent")
        parent = root if parent_name is None else sets.get(str(parent_name))
        if parent is None:
            raise GroupError(f"subgroup {entry['name']} names a missing parent {parent_name!r}")
        parent.children.append(sets[str(entry["name"])])
    if sum(1 for _ in root.walk()) != len(sets) + 1:
        raise GroupError("the PodGroup's subgroups form a cycle")
    by_leaf: dict[str, list[PodRequest]] = {name: [] for name in sets}
    for pod in pods:
        label = _subgroup_label(pod)
        request = _pod_request(pod)
        if label is None or label not in sets or sets[label].children:
            raise GroupError(
                f"pod {request.name} must name a leaf subgroup of its PodGroup in its "
                f"{SUBGROUP_LABEL} label, not {label!r}"
            )
        by_leaf[label].append(request)
    for name, pod_set in sets.items():
        if not pod_set.children:
            _fill_leaf(pod_set, by_leaf[name], minimum[name], f"subgroup {name}")


def _fill_leaf(leaf: PodSet, pods: list[PodRequest], min_member: int, owner: str) -> None:
    leaf.min_member = max(min_member, 1)
    if len(pods) < leaf.min_member:
        raise GroupError(
            f"{owner} needs {leaf.min_member} pods placed together but has only {len(pods)}"
        )
    leaf.members = pods[: leaf.min_member]
    leaf.extras = pods[leaf.min_member :]


def _total(pod_set: PodSet) -> None:
    for child in pod_set.children:
        _total(child)
    members = list(pod_set.all_members())
    total = Demand()
    for pod in members:
        total = total + pod.demand
    pod_set.total = total
    pod_set.count = len(members)
    gpus = {pod.demand.gpu for pod in members}
    pod_set.uniform_gpu = gpus.pop() if len(gpus) == 1 else 0


def requested_shape(manifests: Sequence[Mapping[str, Any]]) -> RequestedShape | None:
    """The shape of a group's stored objects; None when they hold no PodGroup and pods."""
    pod_group = pod_group_of(manifests)
    pods = [m for m in manifests if m.get("kind") == "Pod"]
    if pod_group is None or not pods:
        return None
    try:
        root = read_pod_group(pod_group, pods)
    except GroupError:
        return None
    constraints = []
    for pod_set in root.walk():
        constraint = pod_set.constraint
        if constraint is not None and constraint.required:
            constraints.append(f"required {_short_label(constraint.required)}")
        if constraint is not None and constraint.preferred:
            constraints.append(f"preferred {_short_label(constraint.preferred)}")
    each = [pod.demand.gpu for pod in root.all_pods()]
    same = each[0] if len(set(each)) == 1 else None
    return RequestedShape(len(each), sum(each), same, "; ".join(dict.fromkeys(constraints)))


def _short_label(label: str) -> str:
    """A node label without its prefix: ``nvidia.com/gpu-clique`` reads ``gpu-clique``."""
    return label.rsplit("/", 1)[-1]
