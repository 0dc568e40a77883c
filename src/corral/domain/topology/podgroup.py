"""Topology-aware scheduling: a task group's topology requirements -> KAI's PodGroup.

Pure functions behind OSMO's ``PodGroupTopologyBuilder``
(docs/osmo-reference.md#from-a-group-to-a-podgroup), with the defects listed in
docs/submission.md#differences-from-osmo fixed:

- a single-child chain keeps its finest *required* level and, when finer, its finest
  *preferred* level in one constraint (OSMO kept only the finest level, losing a hard
  requirement);
- tasks without topology in a group whose tree branches get their own unconstrained leaf
  subgroup, so KAI never drops them;
- tree nodes are keyed by ``(key, group)`` under their parent node, never by the joined name, so
  ``zone a + rack b-c`` and ``zone a-b + rack c`` are different nodes;
- subgroup names are RFC 1123 labels (what the PodGroup CRD demands of ``name`` and ``parent``):
  the joined group path when that already is one and is unique, otherwise a readable prefix and
  a hash of the node's structural path;
- a key listed twice in one resource spec, and a tree node that one task requires and another
  only prefers, are rejected.

The uniform-key rule stays OSMO's: every task with topology uses the same set of keys
(``validate_uniform_keys``; OSMO applies it to the whole workflow, ``build_pod_group`` re-checks
it for its group).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.domain.labels import LEGACY_QUEUE as LEGACY_QUEUE_LABEL
from corral.domain.labels import POD_GROUP_ANNOTATION
from corral.domain.labels import QUEUE as QUEUE_LABEL
from corral.domain.labels import SUBGROUP as SUBGROUP_LABEL
from corral.errors import UserError

API_VERSION = "scheduling.run.ai/v2alpha2"
KIND = "PodGroup"
#: KAI's PodGroup as (apiVersion, kind): the one place both are written.
POD_GROUP = (API_VERSION, KIND)
#: Readable name of the extra leaf holding the tasks without topology of a branching group.
NO_TOPOLOGY_SUBGROUP = "no-topology"

_MAX_NAME = 63
_HASH_CHARS = 10
_NOT_IN_LABEL = re.compile(r"[^a-z0-9-]+")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def pod_group_of(manifests: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The group's KAI PodGroup among its objects (another API's kind of that name is not
    it), or None."""
    return next((m for m in manifests if (m.get("apiVersion"), m.get("kind")) == POD_GROUP), None)


@dataclass(frozen=True)
class TopologyRequirement:
    """One entry of a resource spec's ``topology`` list.

    ``group`` defaults to ``default`` and ``requirementType`` to ``required`` in OSMO's
    workflow spec; ``required`` is ``requirementType == "required"``.
    """

    key: str
    group: str = "default"
    required: bool = True


@dataclass(frozen=True)
class PoolTopologyKey:
    """One entry of a pool's ``topology_keys`` (coarsest first): user key -> node label."""

    key: str
    label: str


@dataclass(frozen=True)
class GangTask:
    """A task of the group: its name, its pod's name and its resource spec's requirements."""

    name: str
    pod_name: str
    requirements: tuple[TopologyRequirement, ...] = ()


@dataclass(frozen=True)
class PodGroupPlan:
    """The PodGroup to create and what each task's pod must carry, keyed by task name."""

    manifest: dict[str, Any]
    pod_labels: dict[str, dict[str, str]]
    pod_annotations: dict[str, dict[str, str]]


def topology_crd_name(namespace: str, pool: str) -> str:
    """The cluster-scoped KAI ``Topology`` OSMO syncs for a pool
    (docs/osmo-reference.md#kai-objects-per-pool)."""
    return _object_name(f"osmo-pool-{namespace}-{pool}-topology")


def priority_class_name(priority: str) -> str:
    """The PriorityClass a PodGroup of ``priority`` (HIGH, NORMAL, LOW) names (OSMO's)."""
    return f"osmo-{priority.lower()}"


def queue_name(namespace: str, pool: str) -> str:
    """The pool's KAI ``Queue``; also a label value on the PodGroup and its pods."""
    return _object_name(f"osmo-pool-{namespace}-{pool}")


def _object_name(readable: str) -> str:
    """OSMO's name when it is a valid object name and label value; else a lowercase prefix and a
    hash (OSMO would emit ``osmo-pool-default-my_pool``, which the API server refuses)."""
    if len(readable) <= _MAX_NAME and _DNS_LABEL.fullmatch(readable):
        return readable
    return _hashed(readable, readable)


def _key_list(pool_keys: Sequence[PoolTopologyKey]) -> str:
    return repr(sorted({pool_key.key for pool_key in pool_keys}))


def _check_duplicates(owner: str, requirements: Sequence[TopologyRequirement]) -> None:
    seen: dict[str, TopologyRequirement] = {}
    for requirement in requirements:
        first = seen.setdefault(requirement.key, requirement)
        if first is requirement:
            continue
        if first.required != requirement.required:
            raise UserError(
                f'Topology key "{requirement.key}" in {owner} is both required and preferred; '
                "list each key once with one requirementType."
            )
        raise UserError(
            f'Topology key "{requirement.key}" appears more than once in {owner} (groups '
            f'"{first.group}" and "{requirement.group}"); list each key once. To put tasks '
            "into different groups, give them different resource specs."
        )


def validate_requirements(
    resource_name: str,
    requirements: Sequence[TopologyRequirement],
    pool_keys: Sequence[PoolTopologyKey],
    pool_name: str,
) -> None:
    """Check one resource spec's ``topology`` list against its pool (OSMO's submit-time check).

    Every key must be one of the pool's keys (OSMO's message), and a key may appear only once.
    """
    available = {pool_key.key for pool_key in pool_keys}
    for index, requirement in enumerate(requirements):
        if requirement.key not in available:
            close = difflib.get_close_matches(requirement.key, sorted(available), n=1)
            hint = f' Did you mean "{close[0]}"?' if close else ""
            raise UserError(
                f'Topology key "{requirement.key}" in resource "{resource_name}" is not '
                f'available in pool "{pool_name}".{hint} Available topology keys: '
                f"{_key_list(pool_keys)}",
                path=("workflow", "resources", resource_name, "topology", index, "key"),
            )
    _check_duplicates(f'resource "{resource_name}"', requirements)


def validate_uniform_keys(tasks: Iterable[GangTask]) -> None:
    """OSMO's rule: every task that has topology requirements uses the same set of keys.

    Tasks without requirements are exempt. OSMO applies this to all tasks of a workflow.
    """
    first_task: dict[tuple[str, ...], str] = {}
    for task in tasks:
        if task.requirements:
            keys = tuple(sorted({requirement.key for requirement in task.requirements}))
            first_task.setdefault(keys, task.name)
    if len(first_task) > 1:
        key_list = [", ".join(keys) for keys in first_task]
        users = ", ".join(f'"{name}"' for name in first_task.values())
        raise UserError(
            "Topology validation failed: All tasks must use the same topology keys. "
            f"Found different key sets: {key_list} (first used by tasks {users}). "
            "Either all tasks should have topology requirements with the same keys, "
            "or no tasks should have topology requirements."
        )


def _validate_task(task: GangTask, pool_keys: Sequence[PoolTopologyKey]) -> None:
    available = {pool_key.key for pool_key in pool_keys}
    for requirement in task.requirements:
        if requirement.key not in available:
            raise UserError(
                f'Topology validation failed: Topology key "{requirement.key}" in task '
                f'"{task.name}" not found in pool. Available keys: {_key_list(pool_keys)}'
            )
    _check_duplicates(f'task "{task.name}"', task.requirements)


# -- the constraint tree ----------------------------------------------------------------------


@dataclass
class _Node:
    """A tree node: "every task below shares one domain at ``level``"; the root has none."""

    path: tuple[tuple[str, str], ...]  # (key, group) steps from the root: the node's identity
    level: int  # index in the pool's keys; -1 for the root
    required: bool
    creator: str  # the first task through this node, for conflict messages
    children: dict[tuple[str, str], _Node] = field(default_factory=dict)
    tasks: list[str] = field(default_factory=list)

    def count(self) -> int:
        return len(self.tasks) + sum(child.count() for child in self.children.values())

    def only_child(self) -> _Node | None:
        if len(self.children) != 1:
            return None
        return next(iter(self.children.values()))


def _build_tree(tasks: Sequence[GangTask], order: Mapping[str, int]) -> _Node:
    root = _Node(path=(), level=-1, required=True, creator="")
    for task in tasks:
        node = root
        for requirement in sorted(task.requirements, key=lambda r: order[r.key]):
            step = (requirement.key, requirement.group)
            child = node.children.get(step)
            if child is None:
                child = _Node(
                    path=(*node.path, step),
                    level=order[requirement.key],
                    required=requirement.required,
                    creator=task.name,
                )
                node.children[step] = child
            elif child.required != requirement.required:
                wanted = "required" if child.required else "preferred"
                other = "required" if requirement.required else "preferred"
                raise UserError(
                    f'Topology key "{requirement.key}" group "{requirement.group}" is {wanted} '
                    f'for task "{child.creator}" but {other} for task "{task.name}"; tasks that '
                    "share a topology group must use the same requirementType."
                )
            node = child
        node.tasks.append(task.name)
    return root


def _constraint(
    chain: Sequence[_Node], labels: Sequence[str], topology_name: str
) -> dict[str, str]:
    """One constraint for a chain of nested nodes: finest required + finer preferred level."""
    required = max((node.level for node in chain if node.required), default=None)
    preferred = max((node.level for node in chain if not node.required), default=None)
    constraint = {"topology": topology_name}
    if required is not None:
        constraint["requiredTopologyLevel"] = labels[required]
    if preferred is not None and (required is None or preferred > required):
        constraint["preferredTopologyLevel"] = labels[preferred]
    return constraint


@dataclass
class _Planned:
    """A subgroup to emit: its identity for naming, its tree content and its constraint."""

    identity: Any  # JSON-able, unique per subgroup
    readable: str
    parent: _Planned | None
    member_count: int
    constraint: dict[str, str] | None
    tasks: list[str]
    name: str = ""


def _plan_subgroups(
    branching: _Node, root_tasks: list[str], labels: Sequence[str], topology_name: str
) -> list[_Planned]:
    planned: list[_Planned] = []

    def visit(node: _Node, parent: _Planned | None, chain: list[_Node]) -> None:
        chain = [*chain, node]
        only = node.only_child()
        if parent is None and only is not None:  # pass-through: its level joins the child's
            visit(only, None, chain)
            return
        subgroup = _Planned(
            identity=[list(step) for step in node.path],
            readable="-".join(group for _, group in node.path),
            parent=parent,
            member_count=node.count(),
            constraint=_constraint(chain, labels, topology_name),
            tasks=list(node.tasks),
        )
        planned.append(subgroup)
        for child in node.children.values():
            visit(child, subgroup, [])

    for child in branching.children.values():
        visit(child, None, [])
    if root_tasks:
        planned.append(
            _Planned(
                identity=NO_TOPOLOGY_SUBGROUP,
                readable=NO_TOPOLOGY_SUBGROUP,
                parent=None,
                member_count=len(root_tasks),
                constraint=None,
                tasks=root_tasks,
            )
        )
    return planned


def _hashed(readable: str, identity: Any) -> str:
    digest = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:_HASH_CHARS]
    prefix = _NOT_IN_LABEL.sub("-", readable.lower()).strip("-")
    prefix = prefix[: _MAX_NAME - _HASH_CHARS - 1].rstrip("-")
    return f"{prefix}-{digest}" if prefix else digest


def _assign_names(planned: Sequence[_Planned]) -> None:
    """The readable joined path when it is a valid, unique label; else prefix + hash."""
    for subgroup in planned:
        readable = subgroup.readable
        valid = len(readable) <= _MAX_NAME and _DNS_LABEL.fullmatch(readable)
        subgroup.name = readable if valid else _hashed(readable, subgroup.identity)
    while True:
        by_name: dict[str, list[_Planned]] = {}
        for subgroup in planned:
            by_name.setdefault(subgroup.name, []).append(subgroup)
        clashes = [
            subgroup
            for same in by_name.values()
            if len(same) > 1
            for subgroup in same
            if subgroup.name == subgroup.readable  # hashed names differ by identity already
        ]
        if not clashes:
            return
        for subgroup in clashes:
            subgroup.name = _hashed(subgroup.readable, subgroup.identity)


def _check_group(tasks: Sequence[GangTask]) -> None:
    if not tasks:
        raise UserError("A task group needs at least one task to build its PodGroup.")
    for attribute in ("name", "pod_name"):
        seen: set[str] = set()
        for task in tasks:
            value: str = getattr(task, attribute)
            if value in seen:
                what = "task name" if attribute == "name" else "pod name"
                raise UserError(f'Duplicate {what} "{value}" in the task group; make it unique.')
            seen.add(value)


def build_pod_group(
    *,
    group_uuid: str,
    namespace: str,
    queue: str,
    priority_class: str,
    pool_keys: Sequence[PoolTopologyKey],
    tasks: Sequence[GangTask],
    topology_name: str,
    labels: Mapping[str, str] | None = None,
) -> PodGroupPlan:
    """The KAI PodGroup of one task group and the scheduler labels/annotation of its pods.

    ``labels`` are extra PodGroup labels (the group's ``osmo.*`` system labels); the queue
    labels are written last and win. ``pool_keys`` are the pool's keys, coarsest first;
    ``topology_name`` is ``topology_crd_name(namespace, pool)``.
    """
    _check_group(tasks)
    spec: dict[str, Any] = {"queue": queue, "priorityClassName": priority_class}
    leaf_of: dict[str, str] = {}
    if not any(task.requirements for task in tasks):
        spec["minMember"] = len(tasks)
    else:
        for task in tasks:
            _validate_task(task, pool_keys)
        validate_uniform_keys(tasks)
        order = {pool_key.key: index for index, pool_key in enumerate(pool_keys)}
        node_labels = [pool_key.label for pool_key in pool_keys]
        root = _build_tree(tasks, order)
        shared: list[_Node] = []
        branching = root
        while (only := branching.only_child()) is not None:
            shared.append(only)
            branching = only
        if shared:
            spec["topologyConstraint"] = _constraint(shared, node_labels, topology_name)
        if len(branching.children) < 2:
            spec["minMember"] = len(tasks)
        else:
            planned = _plan_subgroups(branching, root.tasks, node_labels, topology_name)
            _assign_names(planned)
            subgroups: list[dict[str, Any]] = []
            for subgroup in planned:
                entry: dict[str, Any] = {"name": subgroup.name, "minMember": subgroup.member_count}
                if subgroup.parent is not None:
                    entry["parent"] = subgroup.parent.name
                if subgroup.constraint is not None:
                    entry["topologyConstraint"] = subgroup.constraint
                subgroups.append(entry)
                leaf_of.update(dict.fromkeys(subgroup.tasks, subgroup.name))
            spec["subGroups"] = subgroups
    queue_labels = {QUEUE_LABEL: queue, LEGACY_QUEUE_LABEL: queue}
    manifest: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": group_uuid,
            "namespace": namespace,
            "labels": {**(labels or {}), **queue_labels},
        },
        "spec": spec,
    }
    pod_labels: dict[str, dict[str, str]] = {}
    for task in tasks:
        pod_labels[task.name] = dict(queue_labels)
        if task.name in leaf_of:
            pod_labels[task.name][SUBGROUP_LABEL] = leaf_of[task.name]
    pod_annotations = {task.name: {POD_GROUP_ANNOTATION: group_uuid} for task in tasks}
    return PodGroupPlan(manifest=manifest, pod_labels=pod_labels, pod_annotations=pod_annotations)
